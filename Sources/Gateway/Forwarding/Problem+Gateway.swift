import Rewriter

extension Problem {
    public static func noRoute(method: String, path: String) -> Problem {
        Problem(status: 404, code: "no-route", title: "No route matches", detail: "no route matches \(method) \(path)")
    }

    static func bodyTooLarge(limit: Int, route: String?) -> Problem {
        Problem(status: 413, code: "body-too-large", title: "Request body too large",
                detail: "the body exceeds limits.max_body_bytes (\(limit))", route: route)
    }

    static func headersTooLarge(_ detail: String) -> Problem {
        Problem(status: 431, code: "headers-too-large", title: "Request header fields too large", detail: detail)
    }

    /// The full HTTP/1.1 response the gateway answers with.
    public var wireFormat: [UInt8] {
        let body = json
        var out = Array("HTTP/1.1 \(status) \(Self.reason(status))\r\n".utf8)
        out.append(contentsOf: "Content-Type: \(Self.contentType)\r\nContent-Length: \(body.count)\r\n\r\n".utf8)
        out.append(contentsOf: body)
        return out
    }

    public static func reason(_ status: Int) -> String {
        switch status {
        case 400: "Bad Request"
        case 404: "Not Found"
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
