import Rewriter

extension StoredAnswer {
    /// Whether an answer may be stored (RFC 9111 section 3), and as what.
    enum Storability {
        case store(StoredAnswer)
        /// Why not, as `Cache-Status`'s `detail` and the access line say it.
        case refuse(String)
    }

    /// Statuses the route's `ttl` makes fresh when the upstream gives no
    /// freshness (nginx's `proxy_cache_valid` default set, with the other
    /// RFC 9110 section 15.1 success and redirect defaults); any other
    /// status needs the upstream's own `max-age`, `s-maxage` or `Expires`.
    static let ttlStatuses: Set<Int> = [200, 203, 204, 300, 301, 302, 308]

    /// `headers`: the answer's fields as the client gets them; `request`:
    /// the request's fields (its `Vary`'d values are kept); `authorized`: it
    /// carried `Authorization` (section 3.5).
    static func make(status: Int, headers: HeaderList, body: [UInt8], request: HeaderList, authorized: Bool, route: RouteCacheConfig,
                     requestedAt: Int64, now: Int64) -> Storability {
        let control = CacheControl(headers)
        if control.noStore { return .refuse("no-store") }
        if control.isPrivate { return .refuse("private") }
        if authorized, !control.mustRevalidate, !control.isPublic, control.sMaxAge == nil { return .refuse("authorization") }
        // A session-setting answer belongs to one client (nginx and Varnish do not store it either).
        if headers.contains("Set-Cookie") { return .refuse("set-cookie") }
        if status < 200 || status == 206 || status == 304 || status >= 600 { return .refuse("status") }
        var vary: [(name: String, value: String?)] = []
        for value in headers.values("Vary") {
            for name in value.split(separator: ",").map({ String($0.trimmingSpaces) }) where !name.isEmpty {
                if name == "*" { return .refuse("vary-star") }
                let joined = request.values(name).joined(separator: ", ")
                vary.append((name: name.lowercased(), value: joined.isEmpty ? nil : joined))
            }
        }
        let date = headers["Date"].flatMap(HTTPDate.parse) ?? now
        let explicit: Int64? = control.sMaxAge ?? control.maxAge ?? headers["Expires"].map { expires in
            // An invalid Expires (such as 0) means already expired (section 5.3).
            guard let at = HTTPDate.parse(expires) else { return 0 }
            return max(0, at - date)
        }
        let lifetime: Int64
        if let explicit {
            lifetime = explicit
        } else if let ttl = route.ttl, ttlStatuses.contains(status) {
            lifetime = ttl.components.seconds
        } else {
            lifetime = 0
        }
        var stored = headers
        stored.removeAll { perCall($0.name) }
        let answer = StoredAnswer(
            status: status, headers: stored, body: body, storedAt: now,
            initialAge: max(max(0, now - date), (headers["Age"].flatMap { CacheControl.seconds(Substring($0)) } ?? 0) + max(0, now - requestedAt)),
            lifetime: lifetime,
            staleWhileRevalidate: control.staleWhileRevalidate ?? route.staleWhileRevalidate.components.seconds,
            staleIfError: control.staleIfError ?? route.staleIfError.components.seconds,
            mustRevalidate: control.mustRevalidate || control.proxyRevalidate || control.sMaxAge != nil || control.noCache,
            validatesEachUse: control.noCache, vary: vary)
        // Nothing fresh and nothing to revalidate with: storing it would only cost memory.
        if answer.ttl(now: now) <= 0, !answer.canRevalidate, answer.staleIfError == 0, answer.staleWhileRevalidate == 0 { return .refuse("no-freshness") }
        return .store(answer)
    }
}
