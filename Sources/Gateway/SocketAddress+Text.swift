import NIOCore

extension SocketAddress {
    /// `127.0.0.1:8080`, `[::1]:8080`: as an authority and the logs write it.
    public var hostAndPort: String {
        let host = ipAddress ?? "?"
        return (host.contains(":") ? "[\(host)]" : host) + ":\(port ?? 0)"
    }
}
