/// An upstream's base URL: `http(s)://host[:port][/base/path][?query]`.
/// A class: every call reads it, and a struct's copy retained each string.
public final class UpstreamURL: Sendable, Hashable, CustomStringConvertible {
    /// `http` or `https`, lower case.
    public let scheme: String
    /// A name or an IP literal, without brackets.
    public let host: String
    /// The URL's port, else 80 or 443.
    public let port: Int
    /// The base path without a trailing `/` ("" for none).
    public let basePath: String
    /// The URL's own query (without `?`), sent before the route's.
    public let query: String?
    /// What `Host` becomes upstream: made once, read on every call.
    public let authority: String

    /// Whether calls go over TLS.
    public var isTLS: Bool { scheme == "https" }
    /// Equal when written alike.
    public static func == (a: UpstreamURL, b: UpstreamURL) -> Bool { a.description == b.description }
    /// Hashes the written form.
    public func hash(into hasher: inout Hasher) { hasher.combine(description) }
    /// The URL as the config means it.
    public var description: String { "\(scheme)://\(authority)\(basePath)" + (query.map { "?\($0)" } ?? "") }

    /// Parses an `http(s)://` URL; nil for another scheme, user info or a bad authority.
    public init?(_ text: String) {
        guard let schemeEnd = text.range(of: "://") else { return nil }
        scheme = text[..<schemeEnd.lowerBound].lowercased()
        guard scheme == "http" || scheme == "https" else { return nil }
        var rest = text[schemeEnd.upperBound...]
        if let q = rest.firstIndex(of: "?") {
            query = String(rest[rest.index(after: q)...])
            rest = rest[..<q]
        } else {
            query = nil
        }
        let pathStart = rest.firstIndex(of: "/") ?? rest.endIndex
        var path = String(rest[pathStart...])
        while path.hasSuffix("/") { path.removeLast() }
        basePath = path
        guard let address = SocketAddressSpec.parse(String(rest[..<pathStart]), defaultPort: scheme == "https" ? 443 : 80),
            !address.host.contains("@")
        else { return nil }
        host = address.host
        port = address.port
        let h = host.contains(":") ? "[\(host)]" : host
        authority = port == (scheme == "https" ? 443 : 80) ? h : "\(h):\(port)"
    }

    /// Upstream path + route target with exactly one `/` between them; the
    /// upstream's own query goes first, then the route's.
    public func join(_ target: String) -> String {
        // The common case, an upstream URL without path or query: the target as is.
        if basePath.isEmpty, query == nil, target.hasPrefix("/") { return target }
        var path = target
        var routeQuery: Substring?
        if let q = target.firstIndex(of: "?") {
            path = String(target[..<q])
            routeQuery = target[target.index(after: q)...]
        }
        if !path.hasPrefix("/") { path = "/" + path }
        var joined = basePath + path
        let queries = [query.map { Substring($0) }, routeQuery].compactMap { $0 }.filter { !$0.isEmpty }
        if !queries.isEmpty { joined += "?" + queries.joined(separator: "&") }
        return joined
    }
}

extension SocketAddressSpec {
    /// `host:port`, `[v6]:port`, or a bare host when `defaultPort` is given.
    public static func parse(_ text: String, defaultPort: Int? = nil) -> SocketAddressSpec? {
        var host: Substring
        var portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            let after = text[text.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return nil }
                portText = after.dropFirst()
            }
        } else if let colon = text.lastIndex(of: ":") {
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            if host.contains(":") { return nil }
        } else {
            host = Substring(text)
        }
        guard !host.isEmpty else { return nil }
        let port: Int
        if let portText {
            guard let p = Int(portText), (0...65535).contains(p), portText.allSatisfy(\.isASCII) else { return nil }
            port = p
        } else {
            guard let defaultPort else { return nil }
            port = defaultPort
        }
        return SocketAddressSpec(host: String(host), port: port)
    }
}
