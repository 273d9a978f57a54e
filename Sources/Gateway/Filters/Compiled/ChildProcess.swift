import Foundation
import Synchronization

/// A program run as a child process: `engine: compiled`'s tools (and the
/// tests' peers). Hand-written on posix_spawn because Foundation's `Process`
/// lists /proc/self/fd in the parent before each start and copies 256 bytes
/// of every entry's name, reading past its buffer once about 1,360
/// descriptors are open (swift-corelibs-foundation#5472): a SIGSEGV in a
/// daemon that holds that many connections when a reload compiles a filter.
/// swift-subprocess does not do that, but is async only, and a config is
/// read synchronously. The child starts with default signal handling, an
/// empty signal mask and no descriptor but its standard three.
final class ChildProcess: Sendable {
    enum Stream {
        /// The parent's own.
        case inherit
        case null
        /// A pipe; the parent's end is `input`, `output` or `error`.
        case pipe
        /// For standard error only: wherever standard output goes.
        case output
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        /// posix_spawn's error (ENOENT: no such program).
        let code: Int32
    }

    let pid: pid_t
    let input: FileHandle?
    let output: FileHandle?
    let error: FileHandle?
    /// The wait status once reaped. Reaped only under this lock, so `signal`
    /// never reaches a process id the system has given to another process.
    private let reaped = Mutex<Int32?>(nil)

    /// Starts `executable` (looked up on PATH when it names no directory).
    init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil, directory: String? = nil,
         input: Stream = .null, output: Stream = .inherit, error: Stream = .inherit) throws(Failure) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var signals = sigset_t()
        sigemptyset(&signals)
        posix_spawnattr_setsigmask(&attributes, &signals)
        sigfillset(&signals)
        posix_spawnattr_setsigdefault(&attributes, &signals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        // The child's ends are closed here once it has them; the parent's are the handles'.
        var childEnds: [Int32] = []
        defer { for fd in childEnds { close(fd) } }
        func connect(_ stream: Stream, to target: Int32) throws(Failure) -> FileHandle? {
            switch stream {
            case .inherit: return nil
            case .null:
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", O_RDWR, 0)
                return nil
            case .output:
                posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, target)
                return nil
            case .pipe:
                var ends: [Int32] = [-1, -1]
                guard pipe(&ends) == 0 else { throw Failure(description: "cannot make a pipe: \(String(cString: strerror(errno)))", code: errno) }
                // Not inherited by other children started meanwhile (pipe2 is _GNU_SOURCE too).
                for fd in ends { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
                let (child, parent) = target == STDIN_FILENO ? (ends[0], ends[1]) : (ends[1], ends[0])
                childEnds.append(child)
                posix_spawn_file_actions_adddup2(&actions, child, target)
                return FileHandle(fileDescriptor: parent, closeOnDealloc: true)
            }
        }
        self.input = try connect(input, to: STDIN_FILENO)
        self.output = try connect(output, to: STDOUT_FILENO)
        self.error = try connect(error, to: STDERR_FILENO)
        if let directory {
            guard let chdir = Self.addChdir else { throw Failure(description: "cannot start \(executable) in \(directory): no posix_spawn_file_actions_addchdir_np", code: ENOSYS) }
            _ = chdir(&actions, directory)
        }
        _ = Self.addCloseFrom?(&actions, STDERR_FILENO + 1)

        let argv = ([executable] + arguments).map { strdup($0) }
        let envp = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } }
        defer { for pointer in argv + (envp ?? []) { free(pointer) } }
        var pid: pid_t = 0
        let spawned = (argv + [nil]).withUnsafeBufferPointer { argv in
            func spawn(_ envp: UnsafePointer<UnsafeMutablePointer<CChar>?>) -> Int32 {
                executable.contains("/") ? posix_spawn(&pid, executable, &actions, &attributes, argv.baseAddress!, envp)
                    : posix_spawnp(&pid, executable, &actions, &attributes, argv.baseAddress!, envp)
            }
            guard let envp else { return spawn(environ) }
            return (envp + [nil]).withUnsafeBufferPointer { spawn($0.baseAddress!) }
        }
        guard spawned == 0 else { throw Failure(description: "cannot start \(executable): \(String(cString: strerror(spawned)))", code: spawned) }
        self.pid = pid
    }

    deinit {
        // Reaps one that has ended; one still running is its owner's to stop.
        _ = isRunning
    }

    var isRunning: Bool { status() == nil }

    /// The wait status, reaped now if the process has ended; nil while it runs.
    private func status() -> Int32? {
        reaped.withLock { reaped in
            if reaped == nil {
                var status: Int32 = 0
                if waitpid(pid, &status, WNOHANG) == pid { reaped = status }
            }
            return reaped
        }
    }

    /// Sends `signal` unless the process has ended and been reaped.
    func signal(_ signal: Int32) {
        reaped.withLock { if $0 == nil { kill(pid, signal) } }
    }

    /// Waits for the process to end: its exit code, or 128 plus the signal that ended it
    /// (-1 if the system reaped it: SIGCHLD ignored).
    @discardableResult
    func wait() -> Int32 {
        // Waits without reaping, so that the pid stays this process's until the lock is held.
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR {}
        return exitCode ?? -1
    }

    /// The exit code (128 plus the signal for one ended by a signal), or nil while it runs.
    var exitCode: Int32? {
        status().map { $0 & 0x7F == 0 ? ($0 >> 8) & 0xFF : 128 + $0 & 0x7F }
    }

    /// Runs to the end with standard error into standard output: its exit code and what it printed.
    static func run(_ executable: String, _ arguments: [String], directory: String? = nil) throws(Failure) -> (code: Int32, output: Data) {
        let child = try ChildProcess(executable, arguments, directory: directory, output: .pipe, error: .output)
        let printed = child.output!.readDataToEndOfFile()
        return (child.wait(), printed)
    }

    // glibc declares these only for _GNU_SOURCE, which Swift's Glibc module is not built with.
    private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32
    private typealias Chdir = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, UnsafePointer<CChar>?) -> Int32
    private static let addCloseFrom = symbol("posix_spawn_file_actions_addclosefrom_np", as: CloseFrom.self)
    private static let addChdir = symbol("posix_spawn_file_actions_addchdir_np", as: Chdir.self)

    private static func symbol<T>(_ name: String, as: T.Type) -> T? {
        guard let address = dlsym(nil, name) else { return nil }  // nil: RTLD_DEFAULT
        return unsafeBitCast(address, to: T.self)
    }
}
