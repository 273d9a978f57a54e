import Rewriter
import Yams

extension ConfigReader {
    func readRoute(_ node: Node, _ path: String, config: GatewayConfig) -> RouteConfig? {
        guard let fields = mapping(node, path, known: ["name", "match", "upstream", "rewrite", "headers", "response_headers", "keep_host", "timeout", "retry", "validate", "rate_limit", "upgrade", "filters", "response", "cache"]) else { return nil }
        defer { fields.finish() }
        let name = fields.take("name").flatMap { string($0, fields.path("name")) }
        if let name, !routeNames.insert(name).inserted {
            report(fields.take("name"), fields.path("name"), "route name '\(name)' is used twice")
        }
        if !fields.has("name") { report(node, fields.path("name"), "missing: every route needs a name (used in logs and metrics)") }
        var upstream: String?
        if let n = fields.take("upstream"), let value = string(n, fields.path("upstream")) {
            if config.upstream(named: value) == nil {
                if !declaredUpstreams.contains(value) {
                    let known = ([UpstreamConfig.echoName] + declaredUpstreams).joined(separator: ", ")
                    report(n, fields.path("upstream"), "unknown upstream '\(value)' (declared: \(known))")
                }
            } else {
                upstream = value
            }
        } else if !fields.has("upstream") {
            report(node, fields.path("upstream"), "missing")
        }
        var route = RouteConfig(name: name ?? "", upstream: upstream ?? "")
        if let n = fields.take("match") { route.match = readMatch(n, fields.path("match")) }
        if let n = fields.take("rewrite") {
            (route.rewrite, route.prefixRewrite) = readRewrite(n, fields.path("rewrite"))
            if route.prefixRewrite != nil, case .prefix = route.match.path {} else if route.prefixRewrite != nil {
                report(n, fields.path("rewrite.prefix"), "replaces the route's match.prefix, which it has not")
            }
            if let template = route.rewrite?.path { checkSupplied(template, route: route, n.mapping?["path"] ?? n, fields.path("rewrite.path")) }
        }
        if let n = fields.take("cache") {
            route.cache = readRouteCache(n, fields.path("cache"), hasStore: config.store != nil)
            if route.upstream == UpstreamConfig.echoName { warn(n, fields.path("cache"), "the built-in echo answers in process: nothing is ever stored") }
        }
        if let n = fields.take("response") { route.response = readResponse(n, fields.path("response")) }
        if let n = fields.take("headers") { route.headers = readHeaderRules(n, fields.path("headers")) }
        if let n = fields.take("response_headers") { route.responseHeaders = readHeaderRules(n, fields.path("response_headers")) }
        if let n = fields.take("keep_host"), let v = bool(n, fields.path("keep_host")) { route.keepHost = v }
        if let n = fields.take("timeout") { route.timeout = duration(n, fields.path("timeout"), atLeast: .milliseconds(1), effect: "would answer every call 504") }
        if let n = fields.take("rate_limit") { route.rateLimit = readRateLimit(n, fields.path("rate_limit"), hasStore: config.store != nil) }
        if let n = fields.take("filters") { route.filters = readFilterNames(n, fields.path("filters"), declared: config.filters) }
        let upgradeNode = fields.take("upgrade")
        if let n = upgradeNode, let items = sequence(n, fields.path("upgrade")) {
            route.upgrade = items.enumerated().compactMap { index, item in
                guard let name = string(item, fields.path("upgrade") + "[\(index)]") else { return nil }
                guard HeaderList.isValidName(name), name.lowercased() != "h2c" else {
                    report(item, fields.path("upgrade") + "[\(index)]", "expected a protocol token such as websocket, found '\(name)'")
                    return nil
                }
                return name.lowercased()
            }
        }
        let retryNode = fields.take("retry")
        if let n = retryNode { route.retry = readRetry(n, fields.path("retry"), route: route, hasStore: config.store != nil) }
        if let n = fields.take("validate"), let items = sequence(n, fields.path("validate")) {
            route.validate = items.enumerated().compactMap { readValidator($1, fields.path("validate") + "[\($0)]", config: config) }
        }
        // A refresh replays the call with the new credential: that replay is a retry, so it needs one.
        let refreshes = route.validate.contains { validator in
            [validator.then, validator.otherwise].contains { if case .refresh = $0 { true } else { false } }
        }
        if refreshes, (route.retry?.attempts ?? 1) < 2 {
            warn(retryNode ?? node, fields.path(route.retry == nil ? "retry" : "retry.attempts"),
                 "a refresh replays the call as a retry, and this route allows none: every call refused gets the upstream's answer after the refresh; set retry: {attempts: 2} or more")
        }
        if let retry = route.retry {
            for (status, validator) in Self.statusesDecidedFirst(retry: retry, validate: route.validate) {
                warn(retryNode, fields.path("retry.on"),
                     "\(status) is never retried: \(validator.label) decides it first; put that status in its range, or the retry before it")
            }
        }
        if !route.upgrade.isEmpty {
            if route.rewrite != nil || route.validate.contains(where: \.readsBody) {
                warn(upgradeNode, fields.path("upgrade"),
                     "request rewriting and body validators do not apply to upgraded calls (the tunnel's bytes are not HTTP)")
            }
            if config.upstream(named: route.upstream)?.http2 == true {
                report(upgradeNode, fields.path("upgrade"), "upstream \(route.upstream) speaks HTTP/2, which has no Upgrade; use an HTTP/1.1 upstream")
            }
            if route.upstream == UpstreamConfig.echoName { report(upgradeNode, fields.path("upgrade"), "the built-in echo cannot switch protocols") }
        }
        if let timeout = route.timeout, let perTry = route.retry?.perTryTimeout, perTry > timeout {
            report(node, fields.path("retry.per_try_timeout"), "is longer than the route's timeout (\(DurationParser.format(timeout)))")
        }
        return name == nil || upstream == nil ? nil : route
    }

    /// A template variable is filled from the convenience parameters (the
    /// client's query, JSON or form body), from a capture of `match.path`, or
    /// from a declared parameter's default or value. On a `match.prefix`
    /// route a variable that is neither a capture nor declared usually means
    /// the operator hoped to keep the rest of the path, which a template
    /// drops: a warning pointing at `rewrite.prefix`, since a client may
    /// still send it as a parameter.
    private func checkSupplied(_ template: URITemplate, route: RouteConfig, _ node: Node, _ path: String) {
        guard case .prefix = route.match.path else { return }
        let declared = route.rewrite?.params.map(\.name) ?? []
        for name in template.pathVariableNames where !declared.contains(name) {
            warn(node, path, "{\(name)} is not a capture of match.path nor in rewrite.params, so only a client's parameter fills it: the rest of the prefix is dropped; to keep it, use rewrite.prefix")
        }
    }

    func readRateLimit(_ node: Node, _ path: String, hasStore: Bool) -> RateLimitConfig? {
        guard let fields = mapping(node, path, known: ["requests", "per", "burst", "key", "max_keys", "scope", "lease", "on_store_failure"]) else { return nil }
        defer { fields.finish() }
        guard let n = fields.take("requests"), let requests = int(n, fields.path("requests"), in: 1...1_000_000_000) else {
            if !fields.has("requests") { report(node, fields.path("requests"), "missing") }
            return nil
        }
        var per = Duration.seconds(1)
        if let n = fields.take("per"), let v = duration(n, fields.path("per")) {
            if v > .zero { per = v } else { report(n, fields.path("per"), "must be more than 0") }
        }
        var limit = RateLimitConfig(requests: requests, per: per)
        if let n = fields.take("burst"), let v = int(n, fields.path("burst"), in: 0...1_000_000_000) { limit.burst = v }
        if let n = fields.take("max_keys"), let v = int(n, fields.path("max_keys"), in: 1...10_000_000) { limit.maxKeys = v }
        if let n = fields.take("key"), let text = string(n, fields.path("key")) {
            if text == "client_ip" {
                limit.key = .clientIP
            } else if text.hasPrefix("header:"), HeaderList.isValidName(String(text.dropFirst(7))) {
                limit.key = .header(String(text.dropFirst(7)))
            } else {
                report(n, fields.path("key"), "expected client_ip or header:NAME, found '\(text)'")
            }
        }
        if let n = fields.take("scope"), let scope = storeScope(n, fields.path("scope"), hasStore: hasStore) { limit.scope = scope }
        if let n = fields.take("lease"), let v = int(n, fields.path("lease"), in: 1...1_000_000) {
            limit.lease = v
            if v > requests + limit.burst { report(n, fields.path("lease"), "must be at most requests + burst (\(requests + limit.burst))") }
        }
        if let n = fields.take("on_store_failure") { limit.onStoreFailure = oneOf(n, fields.path("on_store_failure")) ?? .local }
        if limit.scope == .local {
            for key in ["lease", "on_store_failure"] where fields.has(key) { warn(node, fields.path(key), "only used with scope: fleet") }
        }
        return limit
    }

    /// The `retry.on` statuses a validator decides before the retry
    /// conditions are asked (its answer for them is not `next` or `retry`),
    /// with that validator: one per status range. Only status validators
    /// are followed; a header or body check may say `next`, so it ends the walk.
    static func statusesDecidedFirst(retry: RetryPolicy, validate: [ValidatorSpec]) -> [(Int, ValidatorSpec)] {
        var decided: [(Int, ValidatorSpec)] = []
        for case .status(let range) in retry.on {
            for status in range {
                for validator in validate {
                    guard case .status(let ranges) = validator.check else { break }
                    let action = ranges.contains { $0.contains(status) } ? validator.then : validator.otherwise
                    if case .next = action { continue }
                    if case .retry = action { break }
                    decided.append((status, validator))
                    break
                }
                if decided.last?.0 == status { break }
            }
        }
        return decided
    }

    func readMatch(_ node: Node, _ path: String) -> RouteMatch {
        var match = RouteMatch()
        guard let fields = mapping(node, path, known: ["methods", "path", "prefix", "host", "headers"]) else { return match }
        defer { fields.finish() }
        if let n = fields.take("methods"), let methods = strings(n, fields.path("methods")) {
            checkMethods(methods, n, fields.path("methods"))
            match.methods = methods
        }
        let exact = fields.take("path").flatMap { n in string(n, fields.path("path")).map { (n, $0) } }
        let prefix = fields.take("prefix").flatMap { n in string(n, fields.path("prefix")).map { (n, $0) } }
        if exact != nil && prefix != nil {
            report(node, fields.path("prefix"), "give either path or prefix, not both")
        } else if let (n, text) = exact {
            if let pattern = PathPattern(text) {
                match.path = pattern.hasCaptures ? .pattern(pattern) : .exact(text)
            } else {
                report(n, fields.path("path"), "expected a path starting with '/' whose {captures} are whole segments, found '\(text)'")
            }
        } else if let (n, text) = prefix {
            if text.hasPrefix("/") { match.path = .prefix(text) } else { report(n, fields.path("prefix"), "must start with '/'") }
        }
        if let n = fields.take("host") { match.host = string(n, fields.path("host"))?.lowercased() }
        if let n = fields.take("headers"), let headers = mapping(n, fields.path("headers"), known: nil) {
            defer { headers.finish() }
            for entry in headers.entries {
                guard HeaderList.isValidName(entry.key) else {
                    report(entry.keyNode, headers.path(entry.key), "not a valid header name")
                    continue
                }
                if let value = string(entry.value, headers.path(entry.key)) { match.headers.append(.init(name: entry.key, value: value)) }
            }
        }
        return match
    }

    func readHeaderRules(_ node: Node, _ path: String) -> HeaderRules {
        var rules = HeaderRules()
        guard let fields = mapping(node, path, known: ["set", "add", "remove"]) else { return rules }
        defer { fields.finish() }
        rules.set = fields.take("set").map { readHeaderFields($0, fields.path("set")) } ?? []
        rules.add = fields.take("add").map { readHeaderFields($0, fields.path("add")) } ?? []
        if let n = fields.take("remove"), let names = strings(n, fields.path("remove")) {
            for name in names where !HeaderList.isValidName(name) { report(n, fields.path("remove"), "'\(name)' is not a valid header name") }
            rules.remove = names
        }
        return rules
    }

    /// `Name: value` pairs; a list of values adds the header once per value.
    func readHeaderFields(_ node: Node, _ path: String) -> [HeaderList.Field] {
        guard let fields = mapping(node, path, known: nil) else { return [] }
        var result: [HeaderList.Field] = []
        for entry in fields.entries {
            let p = fields.path(entry.key)
            guard HeaderList.isValidName(entry.key) else {
                report(entry.keyNode, p, "not a valid header name")
                continue
            }
            let values: [String]
            if case .sequence = entry.value { values = strings(entry.value, p) ?? [] } else { values = string(entry.value, p).map { [$0] } ?? [] }
            for value in values {
                guard HeaderList.isValidValue(value) else {
                    report(entry.value, p, "header values must not contain CR, LF or NUL")
                    continue
                }
                result.append(.init(name: entry.key, value: value))
            }
        }
        return result
    }

    /// Method names as HTTP writes them. An extension method is allowed
    /// (WebDAV's, a legacy service's own), but one a typo away from a
    /// standard method is refused: `GETT` would never match a call.
    func checkMethods(_ methods: [String], _ node: Node, _ path: String) {
        for method in methods {
            if !HeaderList.isValidName(method) || method != method.uppercased() {
                report(node, path, "'\(method)' is not an upper-case method name")
            } else if !Self.standardMethods.contains(method), let meant = NearestName.closest(to: method, in: Self.standardMethods) {
                report(node, path, "'\(method)' is no standard method: did you mean \(meant)?")
            }
        }
    }

    /// RFC 9110's methods, PATCH, and the IANA registry's WebDAV ones.
    static let standardMethods = ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "PROPFIND", "PROPPATCH",
                                  "MKCOL", "COPY", "MOVE", "LOCK", "UNLOCK", "SEARCH", "REPORT", "MERGE", "ACL", "BIND", "LINK", "UNLINK",
                                  "PURGE", "QUERY"]

    /// Routes are matched in order, the first match wins: a route an earlier
    /// one always takes first is never used, which is a warning.
    /// `routes`: those read, with their positions in the file.
    func warnUnreachable(_ routes: [(index: Int, route: RouteConfig)], nodes: [Node]) {
        for (position, (later, route)) in routes.enumerated() {
            guard let (earlier, taker) = routes[..<position].first(where: { Self.covers($0.route.match, route.match) }) else { continue }
            warn(nodes[later], "routes[\(later)]",
                 "never matched: routes[\(earlier)] (\(taker.name)) takes every request this route would (first match wins); move this route above it")
        }
    }

    /// Whether every request `later` matches is matched by `earlier`.
    static func covers(_ earlier: RouteMatch, _ later: RouteMatch) -> Bool {
        guard earlier.host == nil || earlier.host?.lowercased() == later.host?.lowercased(),
              earlier.headers.allSatisfy({ field in later.headers.contains { HeaderList.equalNames($0.name, field.name) && $0.value == field.value } })
        else { return false }
        if let methods = earlier.methods {
            guard let own = later.methods, Set(own).isSubset(of: methods) else { return false }
        }
        switch (earlier.path, later.path) {
        case (.any, _): return true
        case (.prefix(let prefix), .exact(let path)), (.prefix(let prefix), .prefix(let path)): return path.hasPrefix(prefix)
        case (.prefix(let prefix), .pattern(let pattern)): return pattern.source.prefix { $0 != "{" }.hasPrefix(prefix)
        case (.exact(let a), .exact(let b)): return a == b
        case (.pattern(let a), .pattern(let b)): return a == b
        default: return false
        }
    }
}
