import CoreMetrics
import Synchronization

/// Runtime state a route earns while serving (captured credentials, retry
/// budget windows), kept by route name across reloads: a reload that leaves
/// a route's refresh (or budget) config and its token upstream unchanged
/// hands the new route the same state, so it does not refresh again.
/// Anything else gets fresh state; what no route names any more is dropped.
public final class RouteStateRegistry: Sendable {
    private struct Entry {
        var refreshers: [CredentialRefresher] = []
        var budget: RetryBudget?
        var limiter: RateLimiter?
    }

    private let entries = Mutex<[String: Entry]>([:])

    public init() {}

    func refresher(route: String, spec: RefreshSpec, upstream: UpstreamConfig) -> CredentialRefresher {
        entries.withLock { entries in
            if let kept = entries[route]?.refreshers.first(where: { $0.spec == spec && $0.upstream == upstream }) { return kept }
            let made = CredentialRefresher(spec: spec, upstream: upstream)
            entries[route, default: Entry()].refreshers.append(made)
            return made
        }
    }

    func budget(route: String, _ budget: RetryPolicy.Budget) -> RetryBudget {
        entries.withLock { entries in
            if let kept = entries[route]?.budget, kept.budget == budget { return kept }
            let made = RetryBudget(budget)
            entries[route, default: Entry()].budget = made
            return made
        }
    }

    /// A route's rate limiter: the same buckets across a reload that leaves its `rate_limit` as it was.
    func limiter(route: String, _ config: RateLimitConfig, factory: any MetricsFactory) -> RateLimiter {
        entries.withLock { entries in
            if let kept = entries[route]?.limiter, kept.config == config { return kept }
            let made = RateLimiter(config: config, route: route, factory: factory)
            entries[route, default: Entry()].limiter = made
            return made
        }
    }

    /// After a router was built: only what its routes use is kept.
    func keep(only routes: [Route]) {
        entries.withLock { entries in
            var kept: [String: Entry] = [:]
            for route in routes {
                kept[route.config.name] = Entry(refreshers: route.refreshers, budget: route.retryBudget, limiter: route.rateLimiter)
            }
            entries = kept
        }
    }
}
