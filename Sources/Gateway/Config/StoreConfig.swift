/// `store`: where state shared by a fleet of gatewayd processes lives.
/// Today one backend, Redis (or anything speaking its protocol, Valkey).
public struct StoreConfig: Sendable, Hashable {
    /// The server's host name or IP literal.
    public var host: String
    /// The server's port (6379 unless the URL names one).
    public var port: Int
    /// The database number the URL names (`/2`).
    public var database = 0
    /// The URL's password (`AUTH`), nil for none.
    public var password: String?
    /// `rediss://`: TLS to the server, verified against the system's roots
    /// and `ca_file`'s.
    public var tls = false
    /// `ca_file`: PEM roots trusted besides the system's, for `rediss://`.
    public var caFile: String?
    /// How long a command may take, connecting included, before the store
    /// counts as down and each user falls back to its local behaviour.
    public var timeout = Duration.milliseconds(50)
    /// Put before every key gatewayd writes, so fleets can share a server.
    public var keyPrefix = "gatewayd:"

    /// A store at `host`:`port`, database 0, no password, no TLS.
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// `redis://[:password@]host[:port][/db]` or `rediss://...`; nil when malformed.
    public static func parse(url: String) -> StoreConfig? {
        let tls: Bool
        var rest: Substring
        if url.hasPrefix("redis://") { (tls, rest) = (false, url.dropFirst(8)) } else if url.hasPrefix("rediss://") { (tls, rest) = (true, url.dropFirst(9)) } else { return nil }
        var password: String?
        if let at = rest.lastIndex(of: "@") {
            let userInfo = rest[..<at]
            password = userInfo.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).last.map(String.init)
            rest = rest[rest.index(after: at)...]
        }
        var database = 0
        if let slash = rest.firstIndex(of: "/") {
            let path = rest[rest.index(after: slash)...]
            if !path.isEmpty {
                guard let number = Int(path), (0...1_000).contains(number) else { return nil }
                database = number
            }
            rest = rest[..<slash]
        }
        guard let address = SocketAddressSpec.parse(String(rest), defaultPort: 6379),
              !address.host.isEmpty, address.port > 0 else { return nil }
        var config = StoreConfig(host: address.host, port: address.port)
        config.tls = tls
        config.database = database
        config.password = password.flatMap { $0.isEmpty ? nil : $0 }
        return config
    }
}

/// Whose state a setting keeps: this process's, or the fleet's in the `store`
/// (`rate_limit.scope`, `refresh.share`).
public enum StoreScope: String, Sendable, Hashable, CaseIterable {
    case local, fleet
}
