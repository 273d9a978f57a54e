import NIOHTTP1
import Rewriter

/// An answer the gateway writes itself (a problem, the built-in echo's),
/// made without I/O: its head, its body, and whether the connection stays.
struct OwnAnswer {
    var head: ResponseHead
    var body: [UInt8]
    let keepAlive: Bool
    /// A HEAD request's answer has no body.
    let writesBody: Bool

    var status: Int { Int(head.status.code) }

    init(status: Int, headers: HeaderList, body: [UInt8], to request: RequestHead, close: Bool) {
        var headers = headers
        headers.set("Content-Length", String(body.count))
        keepAlive = request.keepsAlive && !close
        if !keepAlive { headers.set("Connection", "close") }
        head = ResponseHead(version: request.version, status: HTTPResponseStatus(statusCode: status), headers: headers)
        self.body = body
        writesBody = request.method != .HEAD
    }

    /// A problem+json answer carrying the request id (every answer does) and the call's trace id.
    init(_ problem: Problem, requestID: String, traceID: String?, extraHeaders: HeaderList, to request: RequestHead, close: Bool) {
        var headers: HeaderList = ["Content-Type": Problem.contentType, "X-Request-Id": requestID,
                                   // The gateway answers as an origin server here, which sends its clock (RFC 9110 section 6.6.1).
                                   "Date": HTTPDate.format(HTTPDate.now())]
        for field in extraHeaders { headers.add(field.name, field.value) }
        var problem = problem
        problem.traceID = traceID
        self.init(status: problem.status, headers: headers, body: problem.json, to: request, close: close)
    }

    /// The built-in echo's answer: the request as it would have gone upstream, as JSON.
    init(echoing request: UpstreamRequest, requestID: String, rules: HeaderRules, to head: RequestHead, close: Bool) {
        var headers: HeaderList = ["Content-Type": "application/json", "X-Request-Id": requestID]
        rules.apply(to: &headers)
        self.init(status: 200, headers: headers, body: EchoUpstream.response(to: request), to: head, close: close)
    }
}

extension ResponseHead {
    /// An upstream's head as it goes to the client: hop-by-hop fields
    /// dropped, `Date` added when missing, the request id and the route's
    /// response rules applied, `Connection: close` when the connection ends.
    mutating func prepareForClient(requestID: String, rules: HeaderRules, close: Bool) {
        // Edits an HTTP/1.1 upstream's fields keep beside their bytes; a route's rules read them as a list.
        removeHopByHop()
        // A 204 has no body to measure (RFC 9110 section 8.6); HTTP/2 clients refuse one that says otherwise.
        if status == .noContent, headers.contains("Content-Length") { headers.remove("Content-Length") }
        // RFC 9110 section 6.6.1: a recipient with a clock forwarding an answer without Date adds one.
        if !(received?.hasDate ?? headers.contains("Date")) { set("Date", HTTPDate.format(HTTPDate.now())) }
        set("X-Request-Id", requestID)
        if !rules.isEmpty { rules.apply(to: &headers) }
        if close { set("Connection", "close") }
    }

    /// An upstream's `101 Switching Protocols` as it goes to the client:
    /// hop-by-hop fields dropped but for `Connection: Upgrade` and `Upgrade`
    /// (the upstream's protocol, else the one asked for), the request id
    /// and the route's response rules applied.
    func switchedForClient(asked: String?, requestID: String, rules: HeaderRules) -> ResponseHead {
        var switched = self
        switched.headers.removeHopByHop()
        switched.headers.set("Connection", "Upgrade")
        if let upgrade = headers["Upgrade"] ?? asked { switched.headers.set("Upgrade", upgrade) }
        switched.headers.set("X-Request-Id", requestID)
        rules.apply(to: &switched.headers)
        return switched
    }
}
