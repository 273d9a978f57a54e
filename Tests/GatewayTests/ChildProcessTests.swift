import Foundation
import Testing
@testable import Gateway

/// Children started with posix_spawn (`ChildProcess`), as the filter compiler
/// and every peer of the suite are: not Foundation's `Process`, whose start
/// reads past its listing of /proc/self/fd once ~1,360 descriptors are open.
@Suite struct ChildProcessTests {
    @Test func startsWithThousandsOfDescriptorsOpenAndTheChildGetsOnlyItsStandardThree() throws {
        raiseDescriptorLimit(to: 4096)
        // Opened without O_CLOEXEC: a child would inherit every one but for the close in the spawn.
        let extra = (0..<2000).map { _ in open("/dev/null", O_RDONLY) }
        defer { for fd in extra where fd >= 0 { close(fd) } }
        #expect(extra.allSatisfy { $0 >= 0 })
        // ls's own descriptors: the three, and the one it lists with.
        #expect(try runPeer("/bin/sh", ["-c", "exec ls /proc/self/fd"]).text == "0\n1\n2\n3\n")
    }

    @Test func exitCodesSignalsInputDirectoryAndEnvironment() throws {
        #expect(try runPeer("/bin/sh", ["-c", "exit 3"]).status == 3)
        #expect(try ChildProcess("/bin/sh", ["-c", "kill -9 $$"]).wait() == 128 + SIGKILL)
        #expect(try runPeer("/bin/cat", [], stdin: Array("through stdin".utf8)).text == "through stdin")
        #expect(try runPeer("/bin/pwd", [], directory: "/tmp").text == "/tmp\n")
        let env = try ChildProcess("/usr/bin/env", [], environment: ["ONLY": "this"], output: .pipe)
        #expect(String(decoding: env.output!.readDataToEndOfFile(), as: UTF8.self) == "ONLY=this\n")
        #expect(env.wait() == 0)
        // Looked up on PATH; standard error joins standard output.
        let run = try ChildProcess.run("sh", ["-c", "echo out; echo err >&2; exit 4"])
        #expect(run.code == 4 && String(decoding: run.output, as: UTF8.self) == "out\nerr\n")
        #expect(throws: ChildProcess.Failure.self) { try ChildProcess("gatewayd-no-such-program", []) }
    }

    /// A peer's deadline does not keep it, nor its pipes, once it is done.
    @Test func aFinishedPeerIsNotHeldByItsDeadline() throws {
        weak var held: ChildProcess?
        do {
            let child = try ChildProcess("/bin/true", [], output: .pipe, error: .pipe)
            held = child
            #expect(withDeadline(child) { child.wait() } == 0)
        }
        #expect(held == nil)
    }

    /// The parent's blocked signals are not the child's: a SIGTERM ends it.
    @Test func theChildStartsWithNoSignalBlocked() throws {
        var blocked = sigset_t(), previous = sigset_t()
        sigemptyset(&blocked)
        sigaddset(&blocked, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &blocked, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        // cat reads its open pipe until a signal ends it; the deadline kills one that SIGTERM did not.
        let child = try ChildProcess("/bin/cat", [], input: .pipe)
        #expect(child.isRunning)
        child.signal(SIGTERM)
        #expect(withDeadline(child, seconds: 10) { child.wait() } == 128 + SIGTERM)
        #expect(!child.isRunning && child.exitCode == 128 + SIGTERM)
    }
}
