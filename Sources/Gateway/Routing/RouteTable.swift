import Rewriter

/// The compiled route table as an operator reads it (`gatewayd routes`,
/// admin `GET /routes`): in matching order, what each route matches, where
/// it goes, and what it rewrites, injects, retries and validates.
package enum RouteTable {
    package static func describe(_ config: GatewayConfig) -> String {
        var out = ""
        for (index, route) in config.routes.enumerated() {
            let upstream = config.upstreams.first { $0.name == route.upstream }
            out += "routes[\(index)] \(route.name)\n"
            line(&out, "match", match(route.match))
            line(&out, "upstream", upstream.map(Self.upstream) ?? "\(route.upstream) (built-in echo)")
            if let prefix = route.prefixRewrite { line(&out, "rewrite", "prefix -> \(prefix)") }
            if let rule = route.rewrite { line(&out, "rewrite", rewrite(rule)) }
            if !route.headers.isEmpty { line(&out, "headers", headers(route.headers)) }
            if !route.responseHeaders.isEmpty { line(&out, "response", headers(route.responseHeaders)) }
            if route.keepHost { line(&out, "host", "the client's Host is kept") }
            line(&out, "timeout", route.timeout.map(DurationParser.format) ?? "60s (default)")
            if let limit = route.rateLimit { line(&out, "limit", rateLimit(limit)) }
            if let retry = route.retry { line(&out, "retry", self.retry(retry)) }
            for validator in route.validate { line(&out, "validate", validate(validator)) }
            let filters = config.filters(of: route)
            if !filters.isEmpty {
                line(&out, "filters", filters.map { "\($0.name) (\($0.wasm)\($0.failOpen ? ", fail_open" : ""))" }.joined(separator: ", ")
                    + (route.filters == nil ? " (default_filters)" : ""))
            }
        }
        return out.isEmpty ? "no routes: every request gets 404\n" : out
    }

    private static func line(_ out: inout String, _ key: String, _ value: String) {
        out += "  " + key.padding(toLength: 10, withPad: " ", startingAt: 0) + value + "\n"
    }

    private static func rateLimit(_ limit: RateLimitConfig) -> String {
        var text = "\(limit.requests) per \(DurationParser.format(limit.per))" + (limit.burst > 0 ? " + \(limit.burst) burst" : "")
        switch limit.key {
        case .clientIP: text += " per client address"
        case .header(let name): text += " per \(name)"
        }
        if limit.scope == .fleet {
            text += ", for the fleet (lease \(limit.leaseSize), \(limit.onStoreFailure == .deny ? "refused" : "local") while the store is down)"
        }
        return text
    }

    private static func match(_ match: RouteMatch) -> String {
        var parts = [match.methods?.joined(separator: ",") ?? "any method"]
        switch match.path {
        case .any: parts.append("any path")
        case .exact(let path): parts.append(path)
        case .prefix(let prefix): parts.append(prefix + "…")
        case .pattern(let pattern): parts.append(pattern.source)
        }
        if let host = match.host { parts.append("host \(host)") }
        for field in match.headers { parts.append("\(field.name): \(field.value)") }
        return parts.joined(separator: "  ")
    }

    private static func rewrite(_ rule: Rule) -> String {
        var parts: [String] = []
        if let method = rule.method { parts.append(method) }
        if let path = rule.path { parts.append(path.description) }
        parts.append("encoding \(rule.encoding.rawValue)")
        if !rule.params.isEmpty {
            parts.append("params " + rule.params.map { param in param.from.map { "\($0)->\(param.name)" } ?? param.name }.joined(separator: ", "))
        }
        return parts.joined(separator: "  ")
    }

    /// Its name and every endpoint (several: with how calls spread over them).
    private static func upstream(_ upstream: UpstreamConfig) -> String {
        let urls = upstream.endpoints.map(\.description).joined(separator: ", ")
        return upstream.endpoints.count > 1 ? "\(upstream.name) \(urls) (\(upstream.balance.rawValue))" : "\(upstream.name) \(urls)"
    }

    private static func headers(_ rules: HeaderRules) -> String {
        var parts: [String] = []
        if !rules.set.isEmpty { parts.append("set " + rules.set.map(\.name).joined(separator: ", ")) }
        if !rules.add.isEmpty { parts.append("add " + rules.add.map(\.name).joined(separator: ", ")) }
        if !rules.remove.isEmpty { parts.append("remove " + rules.remove.joined(separator: ", ")) }
        return parts.joined(separator: "; ")
    }

    private static func retry(_ policy: RetryPolicy) -> String {
        let on = policy.on.map { condition in
            switch condition {
            case .failure(let kind): kind.rawValue
            case .status(let range): range.count == 1 ? "\(range.lowerBound)" : "\(range.lowerBound)-\(range.upperBound)"
            }
        }
        var parts = ["\(policy.attempts) attempts", "on " + on.joined(separator: ", "), "methods " + policy.methods.joined(separator: ",")]
        if let perTry = policy.perTryTimeout { parts.append("per try \(DurationParser.format(perTry))") }
        let backoff = policy.backoff
        switch backoff.strategy {
        case .immediate: parts.append("no backoff")
        case .fixed: parts.append("backoff fixed \(DurationParser.format(backoff.base))")
        case .exponential, .fibonacci:
            parts.append("backoff \(backoff.strategy.rawValue) \(DurationParser.format(backoff.base))..\(DurationParser.format(backoff.max))"
                + (backoff.jitter && backoff.strategy == .exponential ? " with jitter" : ""))
        }
        if let budget = policy.budget {
            parts.append("budget \(Int(budget.ratio * 100))% per \(DurationParser.format(budget.window))" + (budget.scope == .fleet ? " for the fleet" : ""))
        }
        return parts.joined(separator: "; ")
    }

    private static func validate(_ spec: ValidatorSpec) -> String {
        func action(_ action: ValidatorSpec.Action) -> String {
            switch action {
            case .next: "next"
            case .accept: "accept"
            case .fail: "fail"
            case .pass: "pass"
            case .retry: "retry"
            case .refresh(let refresh):
                "refresh via \(refresh.upstream) \(refresh.method) \(refresh.path)\(refresh.share == .fleet ? " (shared by the fleet)" : ""), then retry"
            }
        }
        return "\(spec.label): then \(action(spec.then)), else \(action(spec.otherwise))"
    }
}
