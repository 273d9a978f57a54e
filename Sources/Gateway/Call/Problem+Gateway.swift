import Rewriter

/// Every problem the gateway answers with itself, in one place: the
/// `type` codes are a public contract (clients and dashboards match on them).
extension Problem {
    /// 404 `no-route`: no route matches the method and path.
    public static func noRoute(method: String, path: String) -> Problem {
        Problem(status: 404, code: "no-route", title: "No route matches", detail: "no route matches \(method) \(path)")
    }

    static func bodyTooLarge(limit: Int, route: String?) -> Problem {
        var problem = Problem(status: 413, code: "body-too-large", title: "Request body too large",
                              detail: "the body is larger than this gateway accepts (\(limit) bytes)", route: route)
        problem.logDetail = "the body exceeds limits.max_body_bytes (\(limit))"
        return problem
    }

    /// `logDetail`: the limit by its config key, for the access line only.
    static func headersTooLarge(_ logDetail: String) -> Problem {
        var problem = Problem(status: 431, code: "headers-too-large", title: "Request header fields too large",
                              detail: "the request's header fields are larger than this gateway accepts")
        problem.logDetail = logDetail
        return problem
    }

    static let badTarget = Problem(status: 400, code: "bad-target", title: "Bad request target",
                                   detail: "the target must be /path?query, or an absolute URL naming this gateway; it is not an open proxy")

    static func malformed(_ error: HTTP1ParseError) -> Problem {
        switch error {
        case .headTooLarge:
            return .headersTooLarge("the request head exceeds what the gateway reads (\(error))")
        case .unsupportedTransferCoding:
            return Problem(status: 501, code: "transfer-coding-unsupported", title: "Transfer coding not supported",
                           detail: "\(error); the connection is closed")
        case .unsupportedVersion:
            return Problem(status: 505, code: "version-unsupported", title: "HTTP version not supported", detail: "\(error)")
        case .malformed:
            return Problem(status: 400, code: "malformed-request", title: "Malformed request",
                           detail: "the request is not valid HTTP/1.1: \(error); the connection is closed")
        }
    }

    static func bodyTimeout(_ timeout: Duration, route: String?) -> Problem {
        Problem(status: 408, code: "body-timeout", title: "Request body not received in time",
                detail: "no part of the request body arrived within limits.idle_timeout (\(timeout))", route: route)
    }

    static func deadline(on route: Route) -> Problem {
        Problem(status: 504, code: "deadline", title: "Upstream took too long",
                detail: "no complete response from upstream \(route.upstream.name) within the route's timeout", route: route.config.name)
    }

    /// A try failed in transport: `upstream-<kind>`; a timed-out one is a
    /// gateway timeout, as nginx and Envoy answer it. The client gets a short
    /// stable detail; the full reason (addresses, errno) goes to the access log only.
    static func upstreamFailed(_ error: UpstreamError, on route: Route) -> Problem {
        Problem(status: error.kind == .timeout ? 504 : 502, code: "upstream-\(error.name)", title: "Upstream failed",
                detail: "upstream \(route.upstream.name): \(error.summary)", route: route.config.name)
    }

    static func upgradeNotAllowed(_ protocolName: String, route: String) -> Problem {
        Problem(status: 400, code: "upgrade-not-allowed", title: "Protocol upgrade not allowed",
                detail: "route \(route) does not switch to '\(protocolName)' (routes[].upgrade)", route: route)
    }

    static func rateLimited(route: String) -> Problem {
        Problem(status: 429, code: "rate-limited", title: "Too many requests",
                detail: "route \(route) allows no more calls from this client for now; see Retry-After", route: route)
    }

    static func overloaded(limit: String, on route: Route) -> Problem {
        Problem(status: 503, code: "upstream-overloaded", title: "Upstream at its limit",
                detail: "upstream \(route.upstream.name) is at its \(limit); try again shortly", route: route.config.name)
    }

    /// Which validator refused stays in the access line (`reason`): the client is told no config internals.
    static func validatorFailed(status: Int?, on route: Route) -> Problem {
        let status = status.map { " (upstream status \($0))" } ?? ""
        return Problem(status: 502, code: "validator-failed", title: "Upstream answer refused",
                       detail: "the response of upstream \(route.upstream.name)\(status) did not pass the route's checks", route: route.config.name)
    }

    /// The route's `response:` could not make the upstream's answer the client's (why: `logDetail`).
    static func badUpstreamAnswer(route: String) -> Problem {
        Problem(status: 502, code: "bad-upstream-answer", title: "Bad upstream answer", detail: "the upstream's answer could not be decoded",
                route: route)
    }

    static func answerTooLarge(limit: Int, route: String) -> Problem {
        var problem = Problem(status: 502, code: "bad-upstream-answer", title: "Bad upstream answer",
                              detail: "the upstream's answer is too large to translate", route: route)
        problem.logDetail = "response: the answer is larger than limits.max_response_body_bytes (\(limit))"
        return problem
    }

    static func refreshFailed(upstream: String, error: any Error, route: String) -> Problem {
        Problem(status: 502, code: "refresh-failed", title: "Credential refresh failed",
                detail: "refreshing through upstream \(upstream) failed: \(error)", route: route)
    }

    static func modifierFailed(_ detail: String, route: String) -> Problem {
        Problem(status: 500, code: "modifier-failed", title: "A request modifier failed", detail: detail, route: route)
    }

    static func reloadFailed(_ errors: [String]) -> Problem {
        Problem(status: 422, code: "reload-failed", title: "The new config was refused; the old one still serves",
                detail: errors.joined(separator: "\n"))
    }

    static func methodNotAllowed(_ detail: String) -> Problem {
        Problem(status: 405, code: "method-not-allowed", title: "Method not allowed", detail: detail)
    }

    static let unauthorized = Problem(status: 401, code: "unauthorized", title: "Unauthorized",
                                      detail: "this admin endpoint needs Authorization: Bearer <admin.token>")

    static func notFound(_ detail: String) -> Problem {
        Problem(status: 404, code: "not-found", title: "Not found", detail: detail)
    }

    /// The full HTTP/1.1 response the gateway answers with (`extraHeaders` after its own).
    public func wireFormat(extraHeaders: HeaderList = [:]) -> [UInt8] {
        let body = json
        var out = Array("HTTP/1.1 \(status) \(Self.reason(status))\r\n".utf8)
        out.append(contentsOf: "Content-Type: \(Self.contentType)\r\n".utf8)
        for field in extraHeaders { out.append(contentsOf: "\(field.name): \(field.value)\r\n".utf8) }
        out.append(contentsOf: "Content-Length: \(body.count)\r\n\r\n".utf8)
        out.append(contentsOf: body)
        return out
    }

    /// The reason phrase HTTP/1.1 writes after `status`.
    public static func reason(_ status: Int) -> String {
        switch status {
        case 400: "Bad Request"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 413: "Content Too Large"
        case 415: "Unsupported Media Type"
        case 431: "Request Header Fields Too Large"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        default: "Error"
        }
    }
}
