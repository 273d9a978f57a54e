/// RFC 9112 section 3.2.2: a server must accept a request target in absolute
/// form (`http://host:port/path?query`), as proxies and some clients send it;
/// its authority then replaces Host. gatewayd accepts it only for its own
/// authority (the address the connection came to, or a host one of its
/// routes matches) and refuses any other: it is not an open proxy.
struct AbsoluteForm {
    var authority: Substring
    /// The target in origin form: `/path?query`.
    var originForm: String

    init?(_ target: String) {
        let utf8 = target.utf8
        var rest = Substring(target)
        for scheme in ["http://", "https://"] where utf8.count > scheme.utf8.count
            && utf8.prefix(scheme.utf8.count).elementsEqual(scheme.utf8, by: { $0 | 0x20 == $1 })
        {
            rest = rest.dropFirst(scheme.count)
        }
        guard rest.startIndex != target.startIndex else { return nil }
        let end = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        authority = rest[..<end]
        guard !authority.isEmpty, authority.utf8.allSatisfy(\.isHostChar) else { return nil }
        let tail = rest[end...]
        guard !tail.hasPrefix("#") else { return nil }
        originForm = tail.hasPrefix("/") ? String(tail) : "/" + tail
    }

    /// Whether `authority` names this gateway: the address the connection
    /// came to (`localAuthority`, or `localhost` with its port), or a host
    /// a route matches.
    static func isOwn(_ authority: Substring, localAuthority: String, router: Router) -> Bool {
        let lowered = authority.lowercased()
        if lowered == localAuthority { return true }
        if let port = localAuthority.split(separator: ":").last, lowered == "localhost:\(port)" { return true }
        return router.routes.contains { route in route.config.match.host.map { Router.hostMatches($0, lowered) } ?? false }
    }
}
