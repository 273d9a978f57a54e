import Rewriter

/// What the daemon does with a request head before it becomes a call, in
/// one place for the daemon and `gatewayd explain`: the fields' size, the
/// target (absolute-form only for the gateway's own authority), the path
/// normalized (routing and the upstream read the same path), then the route
/// — or the problem the gateway answers with itself.
enum RequestRouting {
    enum Outcome {
        case routed(Router.Match, path: String)
        /// `headRefused`: the head itself is bad, so the connection closes
        /// whatever follows it; otherwise only an unread body closes it.
        case refused(Problem, extraHeaders: HeaderList, headRefused: Bool)
    }

    static func route(_ head: inout RequestHead, limits: Limits, localAuthority: String, router: Router) -> Outcome {
        // In place: `reduce` over the list would copy each field (two retains and releases).
        let headerBytes = head.headers.withFields { fields in fields.indices.reduce(0) { $0 + fields[$1].name.utf8.count + fields[$1].value.utf8.count + 4 } }
        if headerBytes > limits.maxHeaderBytes {
            return .refused(.headersTooLarge("the headers exceed limits.max_header_bytes (\(limits.maxHeaderBytes))"), extraHeaders: [:],
                            headRefused: true)
        }
        if head.uri.utf8.first != UInt8(ascii: "/") {
            guard let absolute = AbsoluteForm(head.uri), AbsoluteForm.isOwn(absolute.authority, localAuthority: localAuthority, router: router) else {
                return .refused(.badTarget, extraHeaders: [:], headRefused: true)
            }
            head.uri = absolute.originForm
            head.headers.set("Host", String(absolute.authority))
        }
        // A fragment is never sent (RFC 9112 section 3.2): routing `/login#x` apart from `/login` would skip its limits.
        let hasFragment = head.uri.utf8.withContiguousStorageIfAvailable { $0.contains(UInt8(ascii: "#")) } ?? head.uri.utf8.contains(UInt8(ascii: "#"))
        if hasFragment { return .refused(.badTarget, extraHeaders: [:], headRefused: true) }
        let queryStart = Self.queryStart(head.uri)
        let normalized = PathNormalization.normalize(head.uri[..<queryStart])
        let path = String(normalized)
        if normalized.utf8.count != head.uri.utf8.distance(from: head.uri.startIndex, to: queryStart) {
            head.uri = path + head.uri[queryStart...]
        }
        let method = head.method.rawValue, host = head.headers["Host"]
        if let match = router.match(method: method, path: path, host: host, headers: head.headers) {
            return .routed(match, path: path)
        }
        let allowed = router.allowedMethods(path: path, host: host, headers: head.headers)
        guard allowed.isEmpty else {
            let allow = allowed.joined(separator: ", ")
            return .refused(.methodNotAllowed("\(method) \(path): this path takes \(allow)"), extraHeaders: ["Allow": allow], headRefused: false)
        }
        return .refused(.noRoute(method: method, path: path), extraHeaders: [:], headRefused: false)
    }

    /// The protocol a request asks to switch to (lower case): `Upgrade` named
    /// in `Connection`. An `h2c` upgrade is not one the gateway makes: that
    /// request is served as plain HTTP/1.1.
    /// Where the target's query starts (its end when it has none), found in
    /// its contiguous bytes: the view's own search walks by index, ~30
    /// instructions a byte.
    static func queryStart(_ uri: String) -> String.Index {
        let found = uri.utf8.withContiguousStorageIfAvailable { $0.firstIndex(of: UInt8(ascii: "?")) }
        guard let found else { return uri.utf8.firstIndex(of: UInt8(ascii: "?")) ?? uri.endIndex }
        return found.map { uri.utf8.index(uri.startIndex, offsetBy: $0) } ?? uri.endIndex
    }

    static func upgradeAsked(_ headers: HeaderList) -> String? {
        guard let upgrade = headers["Upgrade"], headers.listItems("Connection").contains(where: { HeaderList.equalNames(String($0), "upgrade") })
        else { return nil }
        let name = upgrade.split(separator: ",").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        return name.isEmpty || name == "h2c" ? nil : name
    }

    /// A switch of protocols (`upgrade`, as `upgradeAsked` read it) the route
    /// does not allow, or the client's connection cannot carry (`canTunnel`): its 400.
    static func upgradeRefusal(_ upgrade: String?, route: Route, canTunnel: Bool) -> Problem? {
        guard let upgrade, !route.config.upgrade.contains(upgrade) || !canTunnel else { return nil }
        return .upgradeNotAllowed(upgrade, route: route.config.name)
    }
}
