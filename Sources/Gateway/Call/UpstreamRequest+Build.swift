import NIOCore
import Rewriter

/// A client's call made into the request that goes upstream (the one path
/// for the daemon and `explain`).
extension UpstreamRequest {
    /// Lowest precedence first: the client's headers (hop-by-hop dropped, the
    /// X-Forwarded-* and X-Request-Id of `client` added), the
    /// upstream's `headers`, the route's `headers`, then the encoder's
    /// Content-Type. Throws the client's 4xx problem. The client's list is
    /// consumed: edited in place, not copied, when the caller lets go of it.
    /// `streamed`: the client's body streams upstream as it arrives, framed
    /// so (a pass-through route); otherwise `body` is the whole body.
    public static func build(
        method: String, target: String, headers clientHeaders: consuming HeaderList, body: [UInt8],
        route: RouteConfig, upstream: UpstreamConfig, captures: [(name: String, value: String)] = [],
        client: ClientInfo? = nil, streamed: RequestFraming? = nil, boundary: () -> String = MultipartEncoder.randomBoundary
    ) throws(Problem) -> UpstreamRequest {
        let contentType = route.rewrite == nil ? nil : clientHeaders["Content-Type"]
        var headers = consume clientHeaders
        headers.removeHopByHop()
        // The gateway answers `Expect: 100-continue` itself.
        if headers.expectsContinue { headers.remove("Expect") }
        if let client { client.addForwardingHeaders(to: &headers) }
        // An answer the route translates is read as it is: no compression to undo (the route's rules may still say otherwise).
        if let response = route.response, response.decode != .none { headers.set("Accept-Encoding", "identity") }
        if !route.keepHost || !headers.contains("Host") { headers.set("Host", upstream.authority) }
        upstream.headers.apply(to: &headers)
        route.headers.apply(to: &headers)
        // Framing is the gateway's to write, true to the bytes sent, whoever set these.
        headers.remove("Content-Length")
        headers.remove("Transfer-Encoding")

        let target = route.replacingPrefix(of: target)
        // Each request built once, whole: editing its target afterwards would copy it.
        guard let rule = route.rewrite else {
            let joined = upstream.url.map { $0.join(target) } ?? target
            return UpstreamRequest(method: method, target: joined, headers: consume headers, body: body.isEmpty ? nil : body, framing: streamed)
        }
        var incoming = IncomingRequest(method: method, target: target, contentType: contentType, body: body)
        incoming.captures = captures
        let rewritten: RewrittenRequest
        do {
            rewritten = try rule.apply(to: incoming, boundary: boundary)
        } catch {
            throw error.problem(route: route.name)
        }
        headers.remove("Content-Type")
        if let contentType = rewritten.contentType { headers.add("Content-Type", contentType) }
        if let action = rewritten.soapAction { headers.set("SOAPAction", "\"\(action)\"") }
        let joined = upstream.url.map { $0.join(rewritten.target) } ?? rewritten.target
        return UpstreamRequest(method: rewritten.method, target: joined, headers: consume headers, body: rewritten.body)
    }
}
