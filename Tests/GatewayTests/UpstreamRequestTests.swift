import Rewriter
import Testing
@testable import Gateway

@Suite(.ownThreads) struct UpstreamRequestTests {
    func config(_ routes: String, upstreams: String = "legacy: {url: 'http://10.0.0.1:9000/base/?k=1', headers: {set: {X-Up: up, X-Both: up}}}") throws -> GatewayConfig {
        try ConfigLoader.load(yaml: "listeners: [{address: 127.0.0.1:0}]\nupstreams: {\(upstreams)}\nroutes:\n\(routes)").config
    }

    func build(_ config: GatewayConfig, _ method: String, _ target: String, headers: HeaderList, body: String = "") throws -> UpstreamRequest {
        let route = config.routes[0]
        return try UpstreamRequest.build(method: method, target: target, headers: headers, body: Array(body.utf8), route: route,
                                         upstream: config.upstream(named: route.upstream)!, boundary: { "B" })
    }

    @Test func passThroughKeepsTargetAndBodyAndLayersHeaders() throws {
        let config = try config("  - {name: r, upstream: legacy, headers: {set: {X-Both: route}, add: {X-Add: a}, remove: [Cookie]}}")
        let request = try build(config, "POST", "/p/a%2Fb?x=%20y", headers: [
            "Host": "client.example", "cOOkie": "c", "Connection": "keep-alive, X-Hop", "X-Hop": "1", "Keep-Alive": "5",
            "Transfer-Encoding": "chunked", "TE": "trailers", "Upgrade": "h2c", "Proxy-Authorization": "p", "X-Both": "client",
            "x-CaSe": "kept", "Content-Length": "3", "Expect": "100-Continue",
        ], body: "abc")
        #expect(request.method == "POST")
        #expect(request.target == "/base/p/a%2Fb?k=1&x=%20y")
        #expect(request.body == Array("abc".utf8))
        #expect(request.headers.fields.map { "\($0.name): \($0.value)" } == [
            "Host: 10.0.0.1:9000", "X-Both: route", "x-CaSe: kept", "X-Up: up", "X-Add: a",
        ])
        // Framing is data, written last on the wire.
        #expect(request.framing == .length(3))
        #expect(String(decoding: request.wireFormat, as: UTF8.self).hasSuffix("X-Add: a\r\nContent-Length: 3\r\n\r\nabc"))
    }

    /// One hop-by-hop field (removed by its place), several, and a Connection naming others.
    @Test func hopByHopFieldsGoAndTheRestKeepTheirOrder() {
        let cases: [(HeaderList, [String])] = [
            (["A": "1", "Connection": "keep-alive", "B": "2"], ["A", "B"]),
            (["keep-alive": "5"], []),
            (["A": "1", "B": "2"], ["A", "B"]),
            (["TE": "trailers", "A": "1", "Upgrade": "x", "B": "2", "Trailer": "T"], ["A", "B"]),
            (["A": "1", "Connection": "close, x-gone", "X-Gone": "1", "B": "2"], ["A", "B"]),
            (["Connection": "X-Gone", "A": "1", "x-gone": "1"], ["A"]),
        ]
        for (fields, kept) in cases {
            var headers = fields
            headers.removeHopByHop()
            #expect(headers.fields.map(\.name) == kept, "\(fields.fields.map(\.name))")
        }
        // The filter's names and the byte check agree, in any case; an HTTP2-Settings goes too.
        for name in HeaderList.hopByHopNames { #expect(HeaderList.isHopByHop(name) && HeaderList.isHopByHop(name.uppercased()), "\(name)") }
        #expect(!HeaderList.isHopByHop("content-type") && !HeaderList.isHopByHop("te2"))
        var settings: HeaderList = ["A": "1", "HTTP2-Settings": "AAMAAABkAAQAAP__"]
        settings.removeHopByHop()
        #expect(settings.fields.map(\.name) == ["A"])
    }

    @Test func rewriteReplacesContentTypeAndLength() throws {
        let config = try config("  - {name: r, upstream: legacy, rewrite: {method: GET, path: '/v1{?q}'}}")
        let request = try build(config, "POST", "/search", headers: ["Content-Type": "application/json", "Content-Length": "9"], body: "{\"q\":\"é\"}")
        #expect(request.target == "/base/v1?k=1&q=%C3%A9")
        #expect(request.body == nil)
        #expect(!request.headers.contains("Content-Type"))
        #expect(!request.headers.contains("Content-Length"))
        #expect(String(decoding: request.wireFormat, as: UTF8.self) == "GET /base/v1?k=1&q=%C3%A9 HTTP/1.1\r\nHost: 10.0.0.1:9000\r\nX-Up: up\r\nX-Both: up\r\n\r\n")
    }

    @Test func routeHeadersCanOverrideEncoderOnlyByPrecedenceOrder() throws {
        let config = try config("  - {name: r, upstream: legacy, headers: {set: {Content-Type: text/plain}}, rewrite: {encoding: form}}")
        let request = try build(config, "POST", "/f", headers: ["Content-Type": "application/json"], body: "{\"a\":\"b c\"}")
        #expect(request.headers.values("Content-Type") == ["application/x-www-form-urlencoded"])
        #expect(request.framing == .length(5))
        #expect(request.body == Array("a=b+c".utf8))
    }

    @Test func keepHost() throws {
        let config = try config("  - {name: r, upstream: legacy, keep_host: true}")
        #expect(try build(config, "GET", "/", headers: ["Host": "public.example"]).headers["Host"] == "public.example")
    }

    @Test func badParametersBecomeProblemsNamingTheRoute() throws {
        let config = try config("  - {name: search, upstream: legacy, rewrite: {params: {q: {required: true}}}}")
        #expect(throws: Problem(status: 400, code: "missing-parameter", title: "A required parameter is missing",
                                detail: "required parameter 'q' is missing", route: "search")) {
            try build(config, "GET", "/s", headers: [:])
        }
    }

    @Test(arguments: [
        ("http://h:81", "/a", "/a"), ("http://h:81/", "/a", "/a"), ("http://h:81/b", "/a", "/b/a"), ("http://h:81/b/", "/a?x", "/b/a?x"),
        ("http://h:81/b?u=1", "/a?r=2", "/b/a?u=1&r=2"), ("http://h:81/b?u=1", "/a", "/b/a?u=1"),
    ])
    func urlJoin(base: String, target: String, expected: String) {
        #expect(UpstreamURL(base)!.join(target) == expected)
    }

    @Test func upstreamURLs() {
        #expect(UpstreamURL("https://[::1]/x")?.authority == "[::1]")
        #expect(UpstreamURL("https://[::1]:8443/x")?.port == 8443)
        #expect(UpstreamURL("http://user@h/") == nil)
        #expect(UpstreamURL("http://h:99999") == nil)
        #expect(UpstreamURL("h:80") == nil)
    }
}
