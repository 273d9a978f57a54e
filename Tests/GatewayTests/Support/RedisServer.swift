import Foundation
@testable import Gateway

/// A TCP socket bound to 127.0.0.1 on a free port, and that port; listening when asked.
func loopbackSocket(listening: Bool = false) -> (fd: Int32, port: Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
    _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
    if listening { listen(fd, 16) }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}

/// A TCP connection to 127.0.0.1:`port`, or nil if refused.
func loopbackConnection(port: Int) -> Int32? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else {
        close(fd)
        return nil
    }
    return fd
}

/// A port free a moment ago (bound to 0, read back, released).
func freeLoopbackPort() -> Int {
    let (fd, port) = loopbackSocket()
    close(fd)
    return port
}

/// Debian's redis-server on a free loopback port, with nothing saved to
/// disk; `stop()` ends it and `start()` brings it back on the same port
/// (empty: a restarted server has lost its keys and scripts).
final class RedisServer: @unchecked Sendable {
    let port: Int
    let password: String?
    /// TLS only, with this certificate (its own CA) and key.
    let tls: (certificate: String, key: String)?
    private var process: ChildProcess?

    init(password: String? = nil, tls: (certificate: String, key: String)? = nil) throws {
        self.password = password
        self.tls = tls
        port = freeLoopbackPort()
        try launch()
    }

    var url: String { "\(tls == nil ? "redis" : "rediss")://127.0.0.1:\(port)/0" }

    func start() throws { try launch() }

    func stop() {
        guard let process, process.isRunning else { return }
        process.kill()
        self.process = nil
    }

    deinit { stop() }

    /// A store that stops answering (SIGSTOP) and comes back (SIGCONT), its connections open.
    func pause() { process?.signal(SIGSTOP) }
    func resume() { process?.signal(SIGCONT) }

    /// What `redis-cli` prints for `arguments`.
    func cli(_ arguments: [String]) throws -> String {
        try runPeer("/usr/bin/redis-cli", ["-p", String(port)] + (password.map { ["-a", $0, "--no-auth-warning"] } ?? [])
            + (tls.map { ["--tls", "--cacert", $0.certificate] } ?? []) + arguments).text
    }

    private func launch() throws {
        let listen = tls.map { ["--port", "0", "--tls-port", String(port), "--tls-cert-file", $0.certificate, "--tls-key-file", $0.key,
                                "--tls-auth-clients", "no"] } ?? ["--port", String(port)]
        let process = try ChildProcess("/usr/bin/redis-server", listen + ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                                       "--daemonize", "no", "--loglevel", "warning"] + (password.map { ["--requirepass", $0] } ?? []),
                                       output: .null, error: .null)
        self.process = process
        var up = false
        _ = eventuallyBlocking(timeout: 10) {
            up = (try? cli(["PING"]))?.contains("PONG") == true
            return up || !process.isRunning
        }
        if up { return }
        stop()
        throw CocoaError(.fileReadUnknown)
    }
}
