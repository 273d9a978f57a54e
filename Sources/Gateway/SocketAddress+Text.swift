import NIOCore

extension SocketAddress {
    /// `127.0.0.1:8080`, `[::1]:8080`: as an authority and the logs write it.
    public var hostAndPort: String { Self.hostAndPort(ipAddress ?? "?", port ?? 0) }

    /// An IPv6 address in brackets, so its port stays apart.
    static func hostAndPort(_ host: String, _ port: Int) -> String { (host.contains(":") ? "[\(host)]" : host) + ":\(port)" }
}
