import Testing
@testable import Gateway

/// HTTP/1.1 pipelining on real sockets: requests sent back to back in one
/// write are answered one by one, in order, each with its own body.
@Suite(.ownThreads) struct PipeliningTests {
    /// A gateway with `routes` to upstream `app`, which answers every
    /// request with "METHOD URI BODY-BYTES" (after 200 ms for /slow).
    static func withGateway(routes: String, _ body: (GatewayHarness, RecordingUpstream) async throws -> Void) async throws {
        let upstream = RecordingUpstream { request in
            .respond(status: 200, headers: [], body: Array("\(request.method) \(request.uri) \(request.body.count)".utf8),
                     delay: request.uri == "/slow" ? .milliseconds(200) : .zero)
        }
        let port = try await upstream.start()
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            upstreams: {app: {url: "http://127.0.0.1:\(port)"}}
            routes: \(routes)
            """)
        try await body(gateway, upstream)
    }

    @Test func pipelinedRequestsAreAnsweredInOrder() async throws {
        try await Self.withGateway(routes: "[{name: echo, match: {prefix: /echo}, upstream: echo}, {name: app, upstream: app}]") { gateway, upstream in
            // The first answer is slow: the three after it arrive while it is in flight.
            let requests = "GET /slow HTTP/1.1\r\nHost: a\r\n\r\n"
                + "POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"
                + "GET /echo/x HTTP/1.1\r\nHost: a\r\n\r\n"
                + "GET /last HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
            let out = try rawExchange(port: gateway.port, Array(requests.utf8))
            let statuses = out.components(separatedBy: "HTTP/1.1 200 OK\r\n")
            #expect(statuses.count == 5, "four answers, then the connection closed: \(out)")
            #expect(statuses.count == 5 && statuses[1].hasSuffix("GET /slow 0"))
            #expect(statuses.count == 5 && statuses[2].hasSuffix("POST /upload 5"))
            #expect(statuses.count == 5 && statuses[3].contains(#""path":"/echo/x""#))
            #expect(statuses.count == 5 && statuses[4].lowercased().contains("connection: close") && statuses[4].hasSuffix("GET /last 0"))
            #expect(!out.contains("<timeout>"))
            #expect(upstream.requests.map(\.uri) == ["/slow", "/upload", "/last"])
        }
    }

    /// A streamed body read whole before its upstream connection was made
    /// (the first call to a new upstream): the connection still reads the
    /// client's next request, which goes on it (curl reuses the connection,
    /// the upstream gets each body once).
    @Test func theRequestAfterABodyReadBeforeItsConnectionWasMadeIsRead() async throws {
        try await Self.withGateway(routes: "[{name: app, upstream: app}]") { gateway, upstream in
            let url = "http://127.0.0.1:\(gateway.port)"
            let out = try curl(["-d", "hello", "-w", " %{num_connects} %{http_code}\n", "\(url)/first", "\(url)/second"]).text
            #expect(out == "POST /first 5 1 200\nPOST /second 5 0 200\n", "\(out)")
            #expect(upstream.requests.map(\.uri) == ["/first", "/second"])
            #expect(upstream.requests.map { String(decoding: $0.body, as: UTF8.self) } == ["hello", "hello"])
        }
    }

    /// A client that sends its requests and then closes its sending side
    /// (half-close) gets every answer before the connection closes; one
    /// whose request was cut short by the close gets none, and nothing
    /// half-read goes upstream.
    @Test func halfClosedClientsGetTheirAnswers() async throws {
        let routes = "[{name: app, upstream: app, rewrite: {encoding: form}, match: {prefix: /form}}, {name: all, upstream: app}]"
        try await Self.withGateway(routes: routes) { gateway, upstream in
            let out = try rawExchange(port: gateway.port, Array(
                "GET /slow HTTP/1.1\r\nHost: a\r\n\r\nPOST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello".utf8),
                timeout: 5, halfClose: true)
            let answers = out.components(separatedBy: "HTTP/1.1 200 OK\r\n")
            #expect(answers.count == 3 && answers[1].hasSuffix("GET /slow 0") && answers[2].hasSuffix("POST /upload 5"), "\(out)")
            #expect(!out.hasSuffix("<timeout>"))

            let cut = try rawExchange(port: gateway.port, Array(
                "POST /form HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{\"a\":".utf8),
                timeout: 5, halfClose: true)
            #expect(cut.isEmpty)
            let idle = try rawExchange(port: gateway.port, [], timeout: 5, halfClose: true)
            #expect(idle.isEmpty)
            #expect(upstream.requests.map(\.uri) == ["/slow", "/upload"])
        }
    }
}
