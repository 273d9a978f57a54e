import Rewriter
import Yams

extension ConfigReader {
    func readRetry(_ node: Node, _ path: String, route: RouteConfig, hasStore: Bool) -> RetryPolicy? {
        guard let fields = mapping(node, path, known: ["attempts", "per_try_timeout", "on", "methods", "backoff", "retry_after", "budget"]) else { return nil }
        defer { fields.finish() }
        var policy = RetryPolicy()
        if let n = fields.take("attempts"), let v = int(n, fields.path("attempts"), in: 1...10) { policy.attempts = v }
        if let n = fields.take("per_try_timeout") {
            policy.perTryTimeout = duration(n, fields.path("per_try_timeout"), atLeast: .milliseconds(1), effect: "would time every try out")
        }
        if let n = fields.take("on"), let items = sequence(n, fields.path("on")) {
            policy.on = items.enumerated().compactMap { readCondition($1, fields.path("on") + "[\($0)]") }
        }
        if let n = fields.take("methods"), let methods = strings(n, fields.path("methods")) {
            checkMethods(methods, n, fields.path("methods"))
            policy.methods = methods
        }
        if let n = fields.take("backoff"), let backoff = mapping(n, fields.path("backoff"), known: ["strategy", "base", "max", "jitter"]) {
            defer { backoff.finish() }
            if let s = backoff.take("strategy"), let v = oneOf(s, backoff.path("strategy"), RetryPolicy.Backoff.Strategy.self) {
                policy.backoff.strategy = v
            }
            if let s = backoff.take("base"), let v = duration(s, backoff.path("base")) { policy.backoff.base = v }
            if let s = backoff.take("max"), let v = duration(s, backoff.path("max")) { policy.backoff.max = v }
            if let s = backoff.take("jitter"), let v = bool(s, backoff.path("jitter")) {
                policy.backoff.jitter = v
                if v, policy.backoff.strategy != .exponential {
                    report(s, backoff.path("jitter"), "only the exponential strategy is jittered; \(policy.backoff.strategy.rawValue) waits exactly")
                }
            }
            if policy.backoff.max < policy.backoff.base { report(n, backoff.path("max"), "is smaller than base") }
        }
        if let n = fields.take("retry_after"), let text = string(n, fields.path("retry_after")) {
            switch text {
            case "honor": policy.honorRetryAfter = true
            case "ignore": policy.honorRetryAfter = false
            default: report(n, fields.path("retry_after"), "expected one of honor | ignore, found '\(text)'")
            }
        }
        if let n = fields.take("budget"), let budget = mapping(n, fields.path("budget"), known: ["ratio", "window", "min_retries", "scope"]) {
            defer { budget.finish() }
            var spec = RetryPolicy.Budget(ratio: 0.2)
            if let r = budget.take("ratio") {
                if let v = r.float, r.tagName == .float || r.tagName == .int, v > 0, v <= 1 {
                    spec.ratio = v
                } else {
                    report(r, budget.path("ratio"), "expected a number above 0 and at most 1")
                }
            }
            if let w = budget.take("window"), let v = duration(w, budget.path("window")) { spec.window = v }
            if let m = budget.take("min_retries"), let v = int(m, budget.path("min_retries"), in: 0...100_000) { spec.minRetries = v }
            if let s = budget.take("scope"), let scope = storeScope(s, budget.path("scope"), hasStore: hasStore) { spec.scope = scope }
            policy.budget = spec
        }
        return policy
    }

    private func readCondition(_ node: Node, _ path: String) -> RetryPolicy.Condition? {
        if node.tagName == .int, let code = node.int {
            guard (100...599).contains(code) else {
                report(node, path, "status \(code) is not between 100 and 599")
                return nil
            }
            return .status(code...code)
        }
        guard let text = string(node, path) else { return nil }
        if let kind = UpstreamError.Kind(rawValue: text), kind != .unsupported { return .failure(kind) }
        switch text {
        case "5xx": return .status(500...599)
        default:
            if let range = StatusRanges.parse(text)?.first { return .status(range) }
            report(node, path, "expected connect-failure, reset, timeout, refused-stream, 5xx, a status or a range like 500-504, found '\(text)'")
            return nil
        }
    }

    func readValidator(_ node: Node, _ path: String, config: GatewayConfig) -> ValidatorSpec? {
        guard let fields = mapping(node, path, known: ["status", "header", "json", "empty", "then", "else"]) else { return nil }
        defer { fields.finish() }
        let kinds = ["status", "header", "json", "empty"].filter(fields.has)
        guard kinds.count == 1, let kind = kinds.first, let value = fields.take(kind) else {
            report(node, path, kinds.isEmpty ? "needs one of status, header, json or empty" : "give only one of \(kinds.joined(separator: ", "))")
            return nil
        }
        let p = fields.path(kind)
        var check: ValidatorSpec.Check?
        var label = "\(path) (\(kind))"
        switch kind {
        case "status":
            let text = value.scalar?.string ?? ""
            if let ranges = StatusRanges.parse(text) { check = .status(ranges) } else {
                report(value, p, "expected a status, a range like 200-299 or a comma-separated list, found \(describe(value))")
            }
            label = "\(path) (status \(text))"
        case "header":
            check = readHeaderCheck(value, p)
            if case .header(let name, let condition)? = check {
                let what = switch condition {
                case .present: "present"
                case .absent: "absent"
                case .equals(let value): "equals \"\(value)\""
                case .matches(let pattern): "matches \(pattern.source)"
                }
                label = "\(path) (header \(name) \(what))"
            }
        case "json":
            check = readJSONCheck(value, p)
            if case .json(let pointer, _)? = check { label = "\(path) (json \(pointer))" }
        default:
            if let allowed = bool(value, p) {
                if allowed { report(value, p, "only 'empty: false' (the body must not be empty) is meaningful") } else { check = .notEmpty }
            }
        }
        let then = fields.take("then").flatMap { readAction($0, fields.path("then"), config: config) } ?? .next
        let otherwise = fields.take("else").flatMap { readAction($0, fields.path("else"), config: config) } ?? .next
        guard let check else { return nil }
        return ValidatorSpec(check: check, then: then, otherwise: otherwise, label: label)
    }

    private func readHeaderCheck(_ node: Node, _ path: String) -> ValidatorSpec.Check? {
        guard let fields = mapping(node, path, known: ["name", "present", "absent", "equals", "matches"]) else { return nil }
        defer { fields.finish() }
        guard let nameNode = fields.take("name"), let name = string(nameNode, fields.path("name")) else {
            report(node, fields.path("name"), "missing")
            return nil
        }
        guard let (form, v) = readCheckForm(fields, node, path, forms: ["present", "absent", "equals", "matches"]) else { return nil }
        switch form {
        case "present": return .header(name: name, .present)
        case "absent": return .header(name: name, .absent)
        case "equals":
            return string(v, fields.path(form)).map { .header(name: name, .equals($0)) }
        default:
            guard let pattern = string(v, fields.path(form)) else { return nil }
            do {
                return .header(name: name, .matches(try ValidatorSpec.Pattern(pattern)))
            } catch {
                report(v, fields.path(form), "invalid regular expression: \(error)")
                return nil
            }
        }
    }

    private func readJSONCheck(_ node: Node, _ path: String) -> ValidatorSpec.Check? {
        guard let fields = mapping(node, path, known: ["pointer", "present", "absent", "equals", "in"]) else { return nil }
        defer { fields.finish() }
        guard let pointerNode = fields.take("pointer"), let text = string(pointerNode, fields.path("pointer")) else {
            report(node, fields.path("pointer"), "missing")
            return nil
        }
        guard let pointer = JSONPointer(text) else {
            report(pointerNode, fields.path("pointer"), "not a JSON pointer (RFC 6901), e.g. /error or /data/0/id")
            return nil
        }
        guard let (form, v) = readCheckForm(fields, node, path, forms: ["present", "absent", "equals", "in"]) else { return nil }
        switch form {
        case "present": return .json(pointer: pointer, .present)
        case "absent": return .json(pointer: pointer, .absent)
        case "equals":
            return json(v, fields.path(form)).map { .json(pointer: pointer, .equals($0)) }
        default:
            guard case .array(let values)? = json(v, fields.path(form)) else {
                report(v, fields.path(form), "expected a list of values")
                return nil
            }
            return .json(pointer: pointer, .oneOf(values))
        }
    }

    /// The one condition key of a `header` or `json` check; `present` and
    /// `absent` must say `true`.
    private func readCheckForm(_ fields: Fields, _ node: Node, _ path: String, forms: [String]) -> (String, Node)? {
        let given = forms.filter(fields.has)
        guard given.count == 1, let form = given.first, let value = fields.take(form) else {
            report(node, path, "needs exactly one of \(forms.joined(separator: ", "))")
            return nil
        }
        if form == "present" || form == "absent", bool(value, fields.path(form)) != true {
            report(value, fields.path(form), "write '\(form): true'")
            return nil
        }
        return (form, value)
    }

    private func readAction(_ node: Node, _ path: String, config: GatewayConfig) -> ValidatorSpec.Action? {
        if case .scalar(let scalar) = node {
            switch scalar.string {
            case "next": return .next
            case "accept": return .accept
            case "fail": return .fail
            case "pass": return .pass
            case "retry": return .retry
            default:
                report(node, path, "expected one of next | accept | fail | pass | retry, or a refresh mapping, found \(describe(node))")
                return nil
            }
        }
        guard let fields = mapping(node, path, known: ["refresh"]) else { return nil }
        defer { fields.finish() }
        guard let refresh = fields.take("refresh") else {
            report(node, path, "expected 'refresh:'")
            return nil
        }
        return readRefresh(refresh, fields.path("refresh"), config: config).map(ValidatorSpec.Action.refresh)
    }

    private func readRefresh(_ node: Node, _ path: String, config: GatewayConfig) -> RefreshSpec? {
        guard let fields = mapping(node, path, known: ["request", "capture", "min_interval", "share"]) else { return nil }
        defer { fields.finish() }
        guard let requestNode = fields.take("request"), let request = mapping(requestNode, fields.path("request"), known: ["upstream", "method", "path", "headers", "body"]) else {
            if !fields.has("request") { report(node, fields.path("request"), "missing") }
            return nil
        }
        defer { request.finish() }
        guard let captureNode = fields.take("capture"), let capture = mapping(captureNode, fields.path("capture"), known: ["pointer", "header", "format"]) else {
            if !fields.has("capture") { report(node, fields.path("capture"), "missing") }
            return nil
        }
        defer { capture.finish() }
        var upstream: String?
        if let n = request.take("upstream"), let name = string(n, request.path("upstream")) {
            if config.upstream(named: name) == nil { report(n, request.path("upstream"), "unknown upstream '\(name)'") } else { upstream = name }
        } else {
            report(requestNode, request.path("upstream"), "missing")
        }
        let method = request.take("method").flatMap { string($0, request.path("method")) } ?? "POST"
        let requestPath = request.take("path").flatMap { string($0, request.path("path")) }
        if requestPath == nil { report(requestNode, request.path("path"), "missing") }
        let headers = request.take("headers").map { readHeaderRules($0, request.path("headers")) } ?? HeaderRules()
        let body = request.take("body").flatMap { json($0, request.path("body")) }

        var pointer: JSONPointer?
        if let n = capture.take("pointer"), let text = string(n, capture.path("pointer")) {
            pointer = JSONPointer(text)
            if pointer == nil { report(n, capture.path("pointer"), "not a JSON pointer (RFC 6901)") }
        } else {
            report(captureNode, capture.path("pointer"), "missing")
        }
        var header: String?
        if let n = capture.take("header"), let name = string(n, capture.path("header")) {
            if HeaderList.isValidName(name) { header = name } else { report(n, capture.path("header"), "not a valid header name") }
        } else {
            report(captureNode, capture.path("header"), "missing")
        }
        let format = capture.take("format").flatMap { string($0, capture.path("format")) } ?? "{}"
        if !format.contains("{}") { report(captureNode, capture.path("format"), "must contain {} where the captured value goes") }
        var spec = RefreshSpec(upstream: upstream ?? "", method: method, path: requestPath ?? "/", headers: headers, body: body,
                               capturePointer: pointer ?? JSONPointer("")!, captureHeader: header ?? "", format: format)
        if let n = fields.take("min_interval"), let v = duration(n, fields.path("min_interval")) { spec.minInterval = v }
        if let n = fields.take("share"), let share = storeScope(n, fields.path("share"), hasStore: config.store != nil) { spec.share = share }
        guard upstream != nil, requestPath != nil, pointer != nil, header != nil else { return nil }
        return spec
    }
}

/// `200`, `200-299`, `200-299,304`.
enum StatusRanges {
    static func parse(_ text: String) -> [ClosedRange<Int>]? {
        var ranges: [ClosedRange<Int>] = []
        for part in text.split(separator: ",") {
            let bounds = part.trimmingCharacters(in: .whitespaces).split(separator: "-")
            guard (1...2).contains(bounds.count), let low = Int(bounds[0]), let high = Int(bounds.last!),
                (100...599).contains(low), (100...599).contains(high), low <= high
            else { return nil }
            ranges.append(low...high)
        }
        return ranges.isEmpty ? nil : ranges
    }
}
