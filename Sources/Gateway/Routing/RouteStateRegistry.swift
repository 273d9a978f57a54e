import CoreMetrics
import Synchronization

/// Runtime state a route earns while serving (captured credentials, retry
/// budget windows), kept by route name across reloads: a reload that leaves
/// a route's refresh (or budget) config and its token upstream unchanged
/// hands the new route the same state, so it does not refresh again.
/// Anything else gets fresh state; what no route names any more is dropped.
package final class RouteStateRegistry: Sendable {
    private struct Entry {
        var refreshers: [CredentialRefresher] = []
        var budget: RetryBudget?
        var limiter: RateLimiter?
        /// What the route's stored answers were made under (`cacheSettings`): another purges them.
        var cacheSettings: String?
    }

    private let entries = Mutex<[String: Entry]>([:])
    /// The store fleet-wide state lives in (`store`), kept while its config stays.
    private let store = Mutex<RedisClient?>(nil)

    /// Every route's stored answers (made with the first config that caches, resized by later ones).
    private let responseCache = Mutex<ResponseCache?>(nil)

    package init() {}

    /// The process's cache, bounded as `config` says now.
    func cache(_ config: CacheConfig, factory: any MetricsFactory) -> ResponseCache {
        responseCache.withLock { kept in
            if let kept {
                kept.resize(config)
                return kept
            }
            let made = ResponseCache(config, factory: factory)
            kept = made
            return made
        }
    }

    /// The cache, when a config ever made one (the admin's purge).
    var currentCache: ResponseCache? { responseCache.withLock { $0 } }

    func refresher(route: String, spec: RefreshSpec, upstream: UpstreamConfig) -> CredentialRefresher {
        let store = spec.share == .fleet ? currentStore : nil
        return entries.withLock { entries in
            let refreshers = entries[route]?.refreshers ?? []
            if let kept = refreshers.first(where: { $0.spec == spec && $0.upstream == upstream && $0.fleet?.store === store }) { return kept }
            // Keyed by what it is for: the route, the token call and the header it fills.
            let fleet = store.map { FleetCredential(store: $0, key: "\($0.config.keyPrefix)cred:\(route):\(spec.upstream)\(spec.path):\(spec.captureHeader)") }
            let made = CredentialRefresher(spec: spec, upstream: upstream, fleet: fleet)
            entries[route, default: Entry()].refreshers.append(made)
            return made
        }
    }

    func budget(route: String, _ budget: RetryPolicy.Budget) -> RetryBudget {
        let store = budget.scope == .fleet ? currentStore : nil
        return entries.withLock { entries in
            if let kept = entries[route]?.budget, kept.budget == budget, kept.fleet?.store === store { return kept }
            let made = RetryBudget(budget, fleet: store.map { FleetBudget(budget: budget, route: route, store: $0) })
            entries[route, default: Entry()].budget = made
            return made
        }
    }

    /// The store client a config being loaded uses: the one already made
    /// when its `store` is the same, else a new one. The old one stays open
    /// for the routes still serving until `commit` (the new config serves)
    /// or comes back with `rollback` (it never does).
    struct StoreSwap {
        fileprivate let old: RedisClient?
        fileprivate let new: RedisClient?
        fileprivate let changed: Bool
    }

    func swapStore(_ config: StoreConfig?, make: (StoreConfig) throws -> RedisClient) rethrows -> StoreSwap {
        try store.withLock { store in
            guard store?.config != config else { return StoreSwap(old: store, new: store, changed: false) }
            let swap = StoreSwap(old: store, new: try config.map(make), changed: true)
            store = swap.new
            return swap
        }
    }

    func commit(_ swap: StoreSwap) {
        if swap.changed { swap.old?.close() }
    }

    func rollback(_ swap: StoreSwap) {
        guard swap.changed else { return }
        store.withLock { $0 = swap.old }
        swap.new?.close()
    }

    var currentStore: RedisClient? { store.withLock { $0 } }

    /// A route's rate limiter: the same buckets across a reload that leaves its `rate_limit` (and the store) as it was.
    func limiter(route: String, _ config: RateLimitConfig, factory: any MetricsFactory) -> RateLimiter {
        let store = currentStore
        return entries.withLock { entries in
            if let kept = entries[route]?.limiter, kept.config == config, kept.fleet?.store === store || config.scope == .local { return kept }
            let made = RateLimiter(config: config, route: route, factory: factory, store: store)
            entries[route, default: Entry()].limiter = made
            return made
        }
    }

    /// After a router was built: only what its routes use is kept. A
    /// route's stored answers stay when what made them did not change.
    func keep(only routes: [Route]) {
        let purged = entries.withLock { entries in
            var kept: [String: Entry] = [:]
            for route in routes {
                kept[route.config.name] = Entry(refreshers: route.refreshers, budget: route.retryBudget, limiter: route.rateLimiter,
                                                cacheSettings: route.cacheSettings)
            }
            let purged = entries.compactMap { name, entry in
                entry.cacheSettings != nil && kept[name]?.cacheSettings != entry.cacheSettings ? name : nil
            }
            entries = kept
            return Set(purged)
        }
        if !purged.isEmpty { currentCache?.purge { purged.contains($0.route) } }
    }
}
