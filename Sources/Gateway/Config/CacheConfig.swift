/// Top-level `cache`: the memory every route's stored answers share (docs/caching.md).
public struct CacheConfig: Sendable, Equatable {
    /// Stored answers over all routes, least recently used evicted first.
    public var maxBytes = 64 * 1024 * 1024
    /// An answer larger than this is not stored.
    public var maxEntryBytes = 8 * 1024 * 1024

    /// 64 MiB over all routes, 8 MiB at most per answer.
    public init() {}
}

/// A route's `cache`: how long its answers stay fresh, what tells them
/// apart, and what is served when they are stale (RFC 9111, RFC 5861).
public struct RouteCacheConfig: Sendable, Equatable {
    /// A part of `key`.
    public enum KeyPart: Sendable, Equatable, Hashable {
        /// The request's query string (in the key unless left out).
        case query
        /// A request field's value (lower-case name).
        case header(String)
    }

    /// Freshness when the upstream gives none (nginx `proxy_cache_valid`).
    public var ttl: Duration?
    /// What joins method, route and path in the key.
    public var key: [KeyPart] = [.query]
    /// Serve stale at once and refresh in the background, when the upstream says nothing of it.
    public var staleWhileRevalidate = Duration.zero
    /// Serve stale when the upstream fails, when the upstream says nothing of it.
    public var staleIfError = Duration.zero
    /// Concurrent misses for one key make one upstream call.
    public var coalesce = true
    /// `scope: fleet`: the answers are shared through the store by every gatewayd.
    public var scope = StoreScope.local

    /// No ttl: only what the upstream calls fresh is stored; the key is the query string.
    public init() {}
}
