import Rewriter

/// An answer as the cache keeps it: what the client got (after the route's
/// `response:` and `response_headers`), less what belonged to that one call,
/// with what RFC 9111 section 4.2 needs to age it. Times are seconds since 1970.
struct StoredAnswer: Sendable {
    var status: Int
    var headers: HeaderList
    var body: [UInt8]
    /// When the answer arrived (`response_time`).
    var storedAt: Int64
    /// `corrected_initial_age` (section 4.2.3).
    var initialAge: Int64
    /// `freshness_lifetime` (section 4.2.1).
    var lifetime: Int64
    var staleWhileRevalidate: Int64
    var staleIfError: Int64
    /// Never served stale: `must-revalidate`, `proxy-revalidate`, `s-maxage` or `no-cache` (sections 4.2.4, 5.2.2).
    var mustRevalidate: Bool
    /// `no-cache`: validated before every use.
    var validatesEachUse: Bool
    /// The request fields its `Vary` names, and their values in the request that filled it.
    var vary: [(name: String, value: String?)]

    func age(now: Int64) -> Int64 { initialAge + max(0, now - storedAt) }
    /// Seconds of freshness left (negative: stale for that long).
    func ttl(now: Int64) -> Int64 { lifetime - age(now: now) }
    var etag: String? { headers["ETag"] }
    var lastModified: String? { headers["Last-Modified"] }
    var canRevalidate: Bool { etag != nil || lastModified != nil }

    /// What it costs in memory, as the cache counts it.
    var bytes: Int { body.count + headers.reduce(256) { $0 + $1.name.utf8.count + $1.value.utf8.count + 32 } }

    /// Whether it answers a request whose fields are `request` (section 4.1).
    func matches(_ request: HeaderList) -> Bool {
        vary.allSatisfy { Self.varied(request, $0.name) == $0.value }
    }

    /// A request field's value as `Vary` compares it: every line joined, whitespace dropped (nil: absent).
    static func varied(_ request: HeaderList, _ name: String) -> String? {
        let lines = request.values(name)
        guard !lines.isEmpty else { return nil }
        return String(lines.joined(separator: ",").filter { $0 != " " && $0 != "\t" })
    }

    /// How it may be used at `now`.
    enum Use: Equatable {
        case fresh
        /// Served at once while one refresh runs (RFC 5861 section 3).
        case staleWhileRevalidating
        /// Go upstream; it answers if that fails (RFC 5861 section 4), and a `304` keeps it.
        case stale(servesOnError: Bool)
    }

    func use(now: Int64, requestNoCache: Bool) -> Use {
        let ttl = ttl(now: now)
        if ttl > 0, !validatesEachUse, !requestNoCache { return .fresh }
        let staleness = -min(ttl, 0)
        if mustRevalidate { return .stale(servesOnError: false) }
        if !requestNoCache, ttl <= 0, staleness <= staleWhileRevalidate, staleWhileRevalidate > 0 { return .staleWhileRevalidating }
        return .stale(servesOnError: staleness <= staleIfError && staleIfError > 0)
    }

    /// A stale answer still good for an upstream failure now.
    func servesOnError(now: Int64) -> Bool {
        !mustRevalidate && staleIfError > 0 && -min(ttl(now: now), 0) <= staleIfError
    }

    /// Refreshed by a `304` (section 4.3.4): its fields updated by the
    /// `304`'s, aged again from now.
    func refreshed(by notModified: HeaderList, route: RouteCacheConfig, requestedAt: Int64, now: Int64) -> StoredAnswer? {
        var headers = headers
        for field in notModified where !StoredAnswer.perCall(field.name) && !HeaderList.equalNames(field.name, "Content-Length") {
            headers.set(field.name, field.value)
        }
        let vary = vary.map { (name: $0.name, value: $0.value) }
        guard case .store(var answer) = StoredAnswer.make(status: status, headers: headers, body: body, request: [:], authorized: false,
                                                          route: route, requestedAt: requestedAt, now: now)
        else { return nil }
        answer.vary = vary
        return answer
    }

    /// Fields that belong to one call or one connection, never stored.
    static func perCall(_ name: String) -> Bool {
        ["X-Request-Id", "Connection", "Keep-Alive", "Transfer-Encoding", "Age", "Cache-Status", "Set-Cookie", "Content-Length",
         "Proxy-Connection", "Trailer", "Upgrade"].contains { HeaderList.equalNames($0, name) }
    }
}
