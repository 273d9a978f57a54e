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
    /// Statuses heuristically cacheable (RFC 9110 section 15.1), made fresh
    /// from `Last-Modified` when neither the upstream nor the route says how long.
    static let heuristicStatuses: Set<Int> = [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501]

    /// `headers`: the answer's fields as the client gets them; `request`:
    /// the request's fields (its `Vary`'d values are kept); `authorized`: it
    /// carried `Authorization` (section 3.5).
    static func make(status: Int, headers: HeaderList, body: [UInt8], request: HeaderList, authorized: Bool, route: RouteCacheConfig,
                     requestedAt: Int64, now: Int64) -> Storability {
        let control = CacheControl(answer: headers)
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
                vary.append((name: name.lowercased(), value: varied(request, name)))
            }
        }
        let date = headers["Date"].flatMap(HTTPDate.parse) ?? now
        let expires = headers.values("Expires")
        let explicit: Int64? = control.sMaxAge ?? control.maxAge ?? expires.first.map { value in
            // An invalid Expires (such as 0, or not IMF-fixdate, or repeated) means already expired (section 5.3).
            guard expires.count == 1, HTTPDate.isWellFormed(value), let at = HTTPDate.parse(value) else { return 0 }
            return max(0, at - date)
        }
        let lifetime: Int64
        if let explicit {
            lifetime = explicit
        } else if let ttl = route.ttl, ttlStatuses.contains(status) {
            lifetime = ttl.components.seconds
        } else if heuristicStatuses.contains(status), let modified = headers["Last-Modified"].flatMap(HTTPDate.parse), modified < date {
            // Section 4.2.2: a tenth of the time since it last changed, at most a day (as most caches bound it).
            lifetime = min((date - modified) / 10, 86_400)
        } else {
            lifetime = 0
        }
        var stored = headers
        stored.removeAll { perCall($0.name) }
        let answer = StoredAnswer(
            status: status, headers: stored, body: body, storedAt: now,
            initialAge: max(max(0, now - date), ageValue(headers) + max(0, now - requestedAt)),
            lifetime: lifetime,
            staleWhileRevalidate: control.staleWhileRevalidate ?? route.staleWhileRevalidate.components.seconds,
            staleIfError: control.staleIfError ?? route.staleIfError.components.seconds,
            mustRevalidate: control.mustRevalidate || control.proxyRevalidate || control.sMaxAge != nil || control.noCache,
            validatesEachUse: control.noCache, vary: vary)
        // Nothing fresh and nothing to revalidate with: storing it would only cost memory.
        if answer.ttl(now: now) <= 0, !answer.canRevalidate, answer.staleIfError == 0, answer.staleWhileRevalidate == 0 { return .refuse("no-freshness") }
        return .store(answer)
    }

    /// `Age`: the first value of its first line; an invalid one counts as none.
    static func ageValue(_ headers: HeaderList) -> Int64 {
        guard let line = headers["Age"], let first = line.split(separator: ",", omittingEmptySubsequences: false).first else { return 0 }
        return CacheControl.seconds(first.trimmingSpaces) ?? 0
    }
}
