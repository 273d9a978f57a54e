import CoreMetrics
import Rewriter

/// A route compiled for serving: its config and upstream resolved once, held
/// by reference so a call never copies (and retains) the whole config.
package final class Route: Sendable {
    package let config: RouteConfig
    package let upstream: UpstreamConfig
    /// Its place in its router (what `ListenerContext.routeUpstreams` is indexed by).
    let index: Int
    /// The built-in echo answers: no upstream connection.
    package let isEcho: Bool
    /// Nothing reads the request body (no rewrite, no body validator, not echo):
    /// it streams upstream as it arrives, unless the method may be retried
    /// (`streamsBody(method:)`).
    private let nothingReadsBody: Bool
    /// A validator or filter of the route reads response bodies, or its `response:` translates them: they are held whole.
    let readsResponseBodies: Bool
    /// The route's `response:` (nil: its answers stream as they came).
    let answer: AnswerRule?
    /// The route has a retry policy or validators: its tries are judged.
    let judgesTries: Bool
    /// One of its validators reads the answer's body (a translated answer's decoded document).
    let validatorsReadBodies: Bool
    /// Shared by every call of the route, on every event loop.
    let retryBudget: RetryBudget?
    /// One retry from the route's budget (always, when it has none).
    func takeRetry() -> Bool { retryBudget?.takeRetry() ?? true }
    /// One per distinct `refresh` action of the route's validators.
    let refreshers: [CredentialRefresher]
    let metrics: RouteMetrics
    /// The route's `rate_limit`, shared by every event loop.
    let rateLimiter: RateLimiter?
    /// The Proxy-Wasm filters it runs, in order.
    let filters: [FilterConfig]
    /// Where its `cache` keeps answers (nil: it has none).
    let cache: ResponseCache?
    /// `cache: {scope: fleet}`: the store that shares them (nil: local scope, or no store).
    let fleetCache: FleetCache?
    /// What its stored answers are made under: a reload that changes it purges them.
    var cacheSettings: String? {
        config.cache.map { "\($0) \(upstream.name) \(String(describing: config.response)) \(String(describing: config.responseHeaders))" }
    }

    init(config: RouteConfig, index: Int, upstream: UpstreamConfig, upstreams: (String) -> UpstreamConfig?, filters: [FilterConfig],
         metrics: GatewayMetrics, state: RouteStateRegistry, cache: ResponseCache? = nil) {
        self.filters = filters
        self.cache = config.cache == nil ? nil : cache
        fleetCache = config.cache?.scope == .fleet ? state.currentStore.map { FleetCache(store: $0, route: config.name) } : nil
        self.config = config
        self.index = index
        self.upstream = upstream
        isEcho = upstream.isEcho
        self.metrics = RouteMetrics(route: config.name, upstream: upstream.name, factory: metrics.factory, caches: config.cache != nil)
        retryBudget = config.retry?.budget.map { state.budget(route: config.name, $0) }
        rateLimiter = config.rateLimit.map { state.limiter(route: config.name, $0, factory: metrics.factory) }
        var specs: [RefreshSpec] = []
        for validator in config.validate {
            for case .refresh(let spec) in [validator.then, validator.otherwise] where !specs.contains(spec) { specs.append(spec) }
        }
        refreshers = specs.compactMap { spec in upstreams(spec.upstream).map { state.refresher(route: config.name, spec: spec, upstream: $0) } }
        answer = config.response.flatMap { $0.decode == .none ? nil : $0 }
        readsResponseBodies = answer != nil || config.validate.contains(where: \.readsBody)
            || filters.contains { $0.module.exports.contains("proxy_on_response_body") }
        judgesTries = config.retry != nil || !config.validate.isEmpty
        validatorsReadBodies = config.validate.contains(where: \.readsBody)
        // A filter that reads request bodies gets the body whole.
        nothingReadsBody = config.rewrite == nil && !config.validate.contains(where: \.readsBody) && !upstream.isEcho
            && !filters.contains { $0.module.exports.contains("proxy_on_request_body") }
    }

    /// A body streams upstream unless something reads it, or a retry may
    /// replay it (then it is buffered, up to `limits.max_body_bytes`).
    package func streamsBody(method: String) -> Bool {
        nothingReadsBody && !(config.retry?.methods.contains(method) ?? false)
    }
}

/// Picks the first route whose match holds. Built once per config.
package struct Router: Sendable {
    package struct Match: Sendable {
        package var route: Route
        package var index: Int
        /// Pattern captures, percent-decoded once.
        package var captures: [(name: String, value: String)]
    }

    package let routes: [Route]

    /// Every route's upstream must exist in `config` (the loader checks it).
    /// Routes take their runtime state from `state`, which outlives reloads.
    package init(config: GatewayConfig, metrics: GatewayMetrics = GatewayMetrics(factory: NOOPMetricsHandler.instance),
                state: RouteStateRegistry = RouteStateRegistry()) {
        let cache = config.routes.contains { $0.cache != nil } ? state.cache(config.cache, factory: metrics.factory) : nil
        routes = config.routes.enumerated().map { index, route in
            Route(config: route, index: index, upstream: config.upstream(named: route.upstream)!, upstreams: config.upstream(named:),
                  filters: config.filters(of: route), metrics: metrics, state: state, cache: cache)
        }
        state.keep(only: routes)
    }

    /// `path` is the request path (no query).
    package func match(method: String, path: String, host: String?, headers: HeaderList) -> Match? {
        for (index, route) in routes.enumerated() {
            let m = route.config.match
            if let methods = m.methods, !methods.contains(method) { continue }
            if let match = match(route, index: index, path: path, host: host, headers: headers) { return match }
        }
        return nil
    }

    /// When no route matched: the methods of the routes that match all but
    /// the method, for a 405's `Allow` (empty: a 404).
    package func allowedMethods(path: String, host: String?, headers: HeaderList) -> [String] {
        var allowed: [String] = []
        for (index, route) in routes.enumerated() where match(route, index: index, path: path, host: host, headers: headers) != nil {
            for method in route.config.match.methods ?? [] where !allowed.contains(method) { allowed.append(method) }
        }
        return allowed
    }

    private func match(_ route: Route, index: Int, path: String, host: String?, headers: HeaderList) -> Match? {
        let m = route.config.match
        if let expected = m.host, !Self.hostMatches(expected, host) { return nil }
        if !m.headers.allSatisfy({ field in headers.values(field.name).contains(field.value) }) { return nil }
        switch m.path {
        case .any: return Match(route: route, index: index, captures: [])
        case .exact(let exact): return path == exact ? Match(route: route, index: index, captures: []) : nil
        case .prefix(let prefix): return path.hasPrefix(prefix) ? Match(route: route, index: index, captures: []) : nil
        case .pattern(let pattern):
            return Self.captures(of: pattern, in: path).map { Match(route: route, index: index, captures: $0) }
        }
    }

    static func captures(of pattern: PathPattern, in path: String) -> [(name: String, value: String)]? {
        guard path.hasPrefix("/") else { return nil }
        let parts = path.utf8.dropFirst().split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        guard parts.count == pattern.segments.count else { return nil }
        var captures: [(name: String, value: String)] = []
        for (segment, part) in zip(pattern.segments, parts) {
            switch segment {
            case .literal(let literal): guard part.elementsEqual(literal.utf8) else { return nil }
            case .capture(let name):
                guard !part.isEmpty, let value = PercentEncoding.decode(part) else { return nil }
                captures.append((name, value))
            }
        }
        return captures
    }

    /// Exact (case-insensitive, port ignored) or `*.suffix`.
    static func hostMatches(_ expected: String, _ host: String?) -> Bool {
        guard var host = host?.lowercased() else { return false }
        if host.hasPrefix("[") {
            if let close = host.firstIndex(of: "]") { host = String(host[...close]) }
        } else if let colon = host.lastIndex(of: ":") {
            host = String(host[..<colon])
        }
        if expected.hasPrefix("*.") { return host.hasSuffix(expected.dropFirst()) && host.count > expected.count - 1 }
        return host == expected
    }
}
