import Foundation
@testable import Gateway

/// Independent peers run as subprocesses: curl, nghttp, python3 raw sockets.
struct PeerResult {
    var status: Int32
    var out: [UInt8]
    var err: String
    var text: String { String(decoding: out, as: UTF8.self) }
}

/// Runs `body` (which reads `process` to its end and waits for it) with a
/// deadline: a peer still running after `seconds` is killed, so a hung peer
/// fails its test instead of holding the run.
func withDeadline<T>(_ process: ChildProcess, seconds: Double = 150, _ body: () throws -> T) rethrows -> T {
    // Weak: a cancelled item keeps its block until its time comes, and with it the process's pipes.
    let watchdog = DispatchWorkItem { [weak process] in process?.signal(SIGKILL) }
    DispatchQueue.global().asyncAfter(deadline: .now() + seconds, execute: watchdog)
    defer { watchdog.cancel() }
    return try body()
}

/// Peers are started with `ChildProcess`, never Foundation's `Process`,
/// whose start crashes a process with many descriptors open (as the suite is).
func runPeer(_ executable: String, _ arguments: [String], stdin: [UInt8]? = nil, directory: String? = nil) throws -> PeerResult {
    let process = try ChildProcess(executable, arguments, directory: directory, input: stdin == nil ? .null : .pipe, output: .pipe, error: .pipe)
    if let stdin, let input = process.input {
        input.write(Data(stdin))
        try input.close()
    }
    let (outData, errData, status) = withDeadline(process) {
        (process.output!.readDataToEndOfFile(), process.error!.readDataToEndOfFile(), process.wait())
    }
    return PeerResult(status: status, out: Array(outData), err: String(decoding: errData, as: UTF8.self))
}

extension ChildProcess {
    /// A server the test is done with: killed and reaped.
    func kill() {
        signal(SIGKILL)
        wait()
    }
}

/// `runPeer` on a thread of its own: waiting for the peer does not hold one
/// of the few cooperative threads, which the gateway's own tasks (request
/// modifiers) need to answer it.
func runPeerDetached(_ executable: String, _ arguments: [String]) async throws -> PeerResult {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try runPeer(executable, arguments) }) }.start()
    }
}

func curlDetached(_ arguments: [String], maxTime: Int = 10) async throws -> PeerResult {
    try await runPeerDetached("/usr/bin/curl", ["-s", "--max-time", "\(maxTime)", "-A", "test-agent"] + arguments)
}

/// A peer left running while the test does other things; `finish()` waits
/// for it and returns what it wrote to standard output.
final class BackgroundPeer {
    let process: ChildProcess
    /// What `waitFor` read already.
    private var read = ""
    /// What the peer wrote so far, as far as `waitFor` read it.
    var output: String { read }

    init(_ executable: String, _ arguments: [String]) throws {
        process = try ChildProcess(executable, arguments, output: .pipe)
    }

    /// Reads what the peer writes until it holds `marker` or `seconds` pass; whether it does.
    func waitFor(_ marker: String, seconds: Double) -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while !read.contains(marker), Date() < end, readOnce(waiting: 100) != nil {}
        return read.contains(marker)
    }

    /// Takes in what the peer wrote so far, without waiting for more.
    func readWritten() {
        while let count = readOnce(waiting: 0), count > 0 {}
    }

    /// One poll of up to `milliseconds`, then one read: the bytes read (0
    /// when none came in time), nil once the peer closed its output.
    private func readOnce(waiting milliseconds: Int32) -> Int? {
        var ready = pollfd(fd: process.output!.fileDescriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&ready, 1, milliseconds) > 0 else { return 0 }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = Glibc.read(ready.fd, &buffer, buffer.count)
        guard count > 0 else { return nil }
        read += String(decoding: buffer[..<count], as: UTF8.self)
        return count
    }

    func finish() -> String {
        withDeadline(process) {
            let text = read + String(decoding: process.output!.readDataToEndOfFile(), as: UTF8.self)
            process.wait()
            return text
        }
    }
}

/// Polls `condition` until it holds or `seconds` pass; whether it held.
/// Every wait in the tests has such a deadline.
func eventually(timeout seconds: Double, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let end = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < end {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return try await condition()
}

/// The same for a synchronous caller (a process being started or stopped):
/// it blocks its thread, so async code uses `eventually`.
func eventuallyBlocking(timeout seconds: Double, _ condition: () throws -> Bool) rethrows -> Bool {
    let end = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < end {
        if try condition() { return true }
        usleep(20_000)
    }
    return try condition()
}

/// Raises this process's soft limit on open descriptors to `count` when it
/// is lower (Debian's is 1,024) and the hard limit allows; children inherit it.
func raiseDescriptorLimit(to count: rlim_t) {
    var limit = rlimit()
    getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
    if limit.rlim_cur < count, limit.rlim_max >= count {
        limit.rlim_cur = count
        setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
    }
}

func curl(_ arguments: [String]) throws -> PeerResult {
    try runPeer("/usr/bin/curl", ["-s", "--max-time", "10", "-A", "test-agent"] + arguments)
}

/// Sends raw bytes on a fresh TCP connection and returns everything read until
/// the peer closes (`<timeout>` appended if it had not after `timeout` seconds).
/// `halfClose`: the sending side is shut after the bytes.
func rawExchange(port: Int, _ bytes: [UInt8], timeout: Double = 10, halfClose: Bool = false) throws -> String {
    String(decoding: try rawExchangeBytes(port: port, bytes, timeout: timeout, halfClose: halfClose), as: UTF8.self)
}

/// The bytes the server sent back, unconverted (HTTP/2 frames are binary).
func rawExchangeBytes(port: Int, _ bytes: [UInt8], timeout: Double = 10, halfClose: Bool = false) throws -> [UInt8] {
    let script = """
        import socket, sys
        s = socket.create_connection(("127.0.0.1", \(port)), timeout=\(timeout))
        s.sendall(sys.stdin.buffer.read())
        if \(halfClose ? "True" : "False"): s.shutdown(socket.SHUT_WR)
        out = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk: break
                out += chunk
        except socket.timeout:
            out += b"<timeout>"
        sys.stdout.buffer.write(out)
        """
    return try runPeer("/usr/bin/env", ["python3", "-c", script], stdin: bytes).out
}
