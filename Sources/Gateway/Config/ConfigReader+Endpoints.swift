import Yams

/// An upstream's endpoints and what watches them: balance, health checks,
/// outlier detection.
extension ConfigReader {
    /// `url: URL` or `endpoints: [URL, ...]`, one of them; several endpoints
    /// share scheme, base path and query (one request is built for all).
    func readEndpoints(_ node: Node, _ fields: Fields) -> [UpstreamURL]? {
        let urlNode = fields.take("url"), listNode = fields.take("endpoints")
        if urlNode != nil, let listNode {
            report(listNode, fields.path("endpoints"), "give url or endpoints, not both")
            return nil
        }
        let items: [(Node, String)]
        if let urlNode {
            items = [(urlNode, fields.path("url"))]
        } else if let listNode, let list = sequence(listNode, fields.path("endpoints")) {
            guard !list.isEmpty else {
                report(listNode, fields.path("endpoints"), "needs at least one URL")
                return nil
            }
            guard list.count <= 64 else {
                report(listNode, fields.path("endpoints"), "at most 64 endpoints, found \(list.count)")
                return nil
            }
            items = list.enumerated().map { ($1, fields.path("endpoints") + "[\($0)]") }
        } else {
            if listNode == nil { report(node, fields.path("url"), "missing (or endpoints)") }
            return nil
        }
        var urls: [UpstreamURL] = []
        for (item, path) in items {
            guard let text = string(item, path) else { return nil }
            guard let url = UpstreamURL(text) else {
                report(item, path, "expected http://host[:port][/path] or https://..., found '\(text)'")
                return nil
            }
            if let first = urls.first, first.scheme != url.scheme || first.basePath != url.basePath || first.query != url.query {
                report(item, path, "every endpoint needs the same scheme, path and query as the first (\(first))")
                return nil
            }
            if urls.contains(url) {
                report(item, path, "\(url) is listed twice")
                return nil
            }
            urls.append(url)
        }
        return urls
    }

    func readHealthCheck(_ node: Node, _ path: String) -> HealthCheckConfig? {
        guard let fields = mapping(node, path, known: ["path", "method", "interval", "timeout", "healthy_threshold", "unhealthy_threshold",
                                                      "expect", "validate"]) else { return nil }
        defer { fields.finish() }
        var check = HealthCheckConfig()
        if let n = fields.take("path"), let v = string(n, fields.path("path")) {
            if v.hasPrefix("/") { check.path = v } else { report(n, fields.path("path"), "expected a path starting with /, found '\(v)'") }
        }
        if let n = fields.take("method"), let v = string(n, fields.path("method")) { check.method = v.uppercased() }
        if let n = fields.take("interval"), let v = duration(n, fields.path("interval")) {
            if v > .zero { check.interval = v } else { report(n, fields.path("interval"), "must be more than 0") }
        }
        if let n = fields.take("timeout"), let v = duration(n, fields.path("timeout")) {
            if v > .zero { check.timeout = v } else { report(n, fields.path("timeout"), "must be more than 0") }
        }
        if let n = fields.take("healthy_threshold"), let v = int(n, fields.path("healthy_threshold"), in: 1...100) { check.healthyThreshold = v }
        if let n = fields.take("unhealthy_threshold"), let v = int(n, fields.path("unhealthy_threshold"), in: 1...100) { check.unhealthyThreshold = v }
        if let n = fields.take("expect") {
            let text = n.scalar?.string ?? ""
            if let ranges = StatusRanges.parse(text) { check.expect = ranges } else {
                report(n, fields.path("expect"), "expected a status, a range like 200-299 or a comma-separated list, found \(describe(n))")
            }
        }
        if let n = fields.take("validate"), let items = sequence(n, fields.path("validate")) {
            check.validate = items.enumerated().compactMap { index, item in
                let p = fields.path("validate") + "[\(index)]"
                guard let validator = readValidator(item, p, config: GatewayConfig(listeners: [])) else { return nil }
                for action in [validator.then, validator.otherwise] {
                    if case .refresh = action {
                        report(item, p, "a health check cannot refresh a credential")
                        return nil
                    }
                }
                return validator
            }
        }
        return check
    }

    func readOutlier(_ node: Node, _ path: String) -> OutlierConfig? {
        guard let fields = mapping(node, path, known: ["consecutive_failures", "interval", "base_ejection_time", "max_ejection_percent", "on"])
        else { return nil }
        defer { fields.finish() }
        var outlier = OutlierConfig()
        if let n = fields.take("consecutive_failures"), let v = int(n, fields.path("consecutive_failures"), in: 1...1000) {
            outlier.consecutiveFailures = v
        }
        if let n = fields.take("interval"), let v = duration(n, fields.path("interval")) {
            if v > .zero { outlier.interval = v } else { report(n, fields.path("interval"), "must be more than 0") }
        }
        if let n = fields.take("base_ejection_time"), let v = duration(n, fields.path("base_ejection_time")) {
            if v > .zero { outlier.baseEjectionTime = v } else { report(n, fields.path("base_ejection_time"), "must be more than 0") }
        }
        if let n = fields.take("max_ejection_percent"), let v = int(n, fields.path("max_ejection_percent"), in: 0...100) {
            outlier.maxEjectionPercent = v
        }
        if let n = fields.take("on"), let items = sequence(n, fields.path("on")) {
            outlier.on = Set(items.enumerated().compactMap { index, item in
                let p = fields.path("on") + "[\(index)]"
                guard let text = string(item, p) else { return nil }
                guard let failure = OutlierConfig.Failure(rawValue: text) else {
                    report(item, p, "expected \(OutlierConfig.Failure.allCases.map(\.rawValue).joined(separator: ", ")), found '\(text)'")
                    return nil
                }
                return failure
            })
        }
        return outlier
    }
}
