import Foundation
import Testing
@testable import Gateway

/// Calls through the gateway to a recording upstream on real sockets, with
/// curl, nghttp and raw sockets as the client.
@Suite(.serialized, .ownThreads) struct ForwardingTests {
    func withGateway(
        routes: String, upstream: RecordingUpstream = RecordingUpstream(), limits: String = "{}",
        _ body: (GatewayHarness, RecordingUpstream) async throws -> Void
    ) async throws {
        let port = try await upstream.start()
        let yaml = """
            listeners: [{address: 127.0.0.1:0, protocols: [http1, h2c]}]
            limits: \(limits)
            upstreams:
              legacy: {url: "http://127.0.0.1:\(port)/base", max_connections: 4}
              dead: {url: "http://127.0.0.1:1", connect_timeout: 500ms}
            routes:
            \(routes)
            """
        // Both are stopped by the test's Teardown scope, whether it throws or not.
        try await body(GatewayHarness.start(yaml), upstream)
    }

    static let passThrough = """
          - name: api
            match: {prefix: /api/}
            upstream: legacy
            headers: {set: {X-Injected: "yes"}, remove: [Cookie]}
            response_headers: {remove: [Server]}
        """

    @Test func passThroughOverHTTP1() async throws {
        let upstream = RecordingUpstream { _ in
            .respond(status: 201, headers: [("Server", "legacy/1.0"), ("X-Up", "u"), ("Connection", "keep-alive, X-Secret"), ("X-Secret", "s")],
                     body: Array("created\n".utf8))
        }
        try await withGateway(routes: Self.passThrough, upstream: upstream) { gateway, upstream in
            let result = try curl(["-i", "\(gateway.base)/api/a%2Fb/%C3%A9?x=1&y=%20+&z", "-H", "x-MiXeD-CaSe: kept",
                                   "-H", "Cookie: secret", "-H", "Connection: keep-alive, X-Hop", "-H", "X-Hop: 1",
                                   "-H", "Keep-Alive: timeout=5", "-H", "Proxy-Authorization: Basic x", "-H", "X-Request-Id: rid-1",
                                   "-H", "X-Forwarded-For: 10.0.0.9"])
            let request = try #require(upstream.requests.first)
            #expect(request.method == "GET")
            #expect(request.uri == "/base/api/a%2Fb/%C3%A9?x=1&y=%20+&z")
            #expect(request.headers.map(\.0) == ["Host", "User-Agent", "Accept", "x-MiXeD-CaSe", "X-Request-Id", "X-Forwarded-For",
                                                  "X-Forwarded-Proto", "X-Forwarded-Host", "X-Injected"])
            #expect(request.header("Host") == ["127.0.0.1:\(upstream.port)"])
            #expect(request.header("x-mixed-case") == ["kept"])
            // The client is no trusted proxy: its claim is replaced.
            #expect(request.header("X-Forwarded-For") == ["127.0.0.1"])
            #expect(request.header("X-Forwarded-Proto") == ["http"])
            #expect(request.header("X-Forwarded-Host") == ["127.0.0.1:\(gateway.port)"])
            #expect(request.header("X-Request-Id") == ["rid-1"])
            #expect(request.header("X-Injected") == ["yes"])
            #expect(request.body.isEmpty)
            let text = result.text
            #expect(text.hasPrefix("HTTP/1.1 201 Created\r\n"))
            #expect(text.contains("X-Up: u\r\n"))
            #expect(text.contains("X-Request-Id: rid-1\r\n"))
            #expect(!text.contains("Server:"))
            #expect(!text.contains("X-Secret"))
            #expect(text.hasSuffix("\r\n\r\ncreated\n"))
        }
    }

    @Test func bodiesAreForwardedByteForByte() async throws {
        let upstream = RecordingUpstream { request in .respond(status: 200, headers: [], body: request.body.reversed()) }
        try await withGateway(routes: Self.passThrough, upstream: upstream) { gateway, upstream in
            let payload = (0..<3).flatMap { _ in (0...255).map { UInt8($0) } }
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("payload-\(getpid()).bin")
            try Data(payload).write(to: file)
            defer { try? FileManager.default.removeItem(at: file) }
            let result = try curl(["\(gateway.base)/api/upload", "-H", "Content-Type: application/octet-stream", "--data-binary", "@\(file.path)"])
            let request = try #require(upstream.requests.first)
            #expect(request.method == "POST")
            #expect(request.body == payload)
            #expect(request.header("Content-Length") == ["768"])
            #expect(request.header("Content-Type") == ["application/octet-stream"])
            #expect(result.out == payload.reversed())
        }
    }

    @Test func chunkedUploadsStreamThroughOverBothProtocols() async throws {
        let upstream = RecordingUpstream { request in .respond(status: 200, headers: [], body: Array("\(request.body.count)".utf8)) }
        try await withGateway(routes: Self.passThrough, upstream: upstream) { gateway, upstream in
            let payload = Array(String(repeating: "0123456789abcdef", count: 200_000).utf8)  // 3.2 MB, over max_body_bytes
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("chunked-\(getpid()).bin")
            try Data(payload).write(to: file)
            defer { try? FileManager.default.removeItem(at: file) }
            let h1 = try curl(["\(gateway.base)/api/stream", "-H", "Transfer-Encoding: chunked", "--data-binary", "@\(file.path)"])
            #expect(h1.text == "3200000")
            let h2 = try curl(["--http2-prior-knowledge", "\(gateway.base)/api/stream2", "--data-binary", "@\(file.path)"])
            #expect(h2.text == "3200000")
            let requests = upstream.requests
            #expect(requests.count == 2)
            #expect(requests[0].header("Transfer-Encoding") == ["chunked"])
            #expect(requests[0].header("Content-Length").isEmpty)
            #expect(requests[1].header("Content-Length") == ["3200000"])
            #expect(requests.allSatisfy { $0.body == payload })
        }
    }

    @Test func rewriteRouteSendsTheTranslatedRequest() async throws {
        let routes = """
              - name: orders
                match: {methods: [POST], path: "/orders/{shop}"}
                upstream: legacy
                rewrite: {method: PUT, path: "/legacy/{shop}/order.php", encoding: form, params: {qty: {type: int}}}
            """
        try await withGateway(routes: routes) { gateway, upstream in
            let result = try curl(["-i", "\(gateway.base)/orders/main%20st", "-H", "Content-Type: application/json",
                                   "-d", #"{"item":"A 1","qty":"007","tags":["x","y"]}"#])
            #expect(result.text.hasPrefix("HTTP/1.1 200 OK\r\n"))
            let request = try #require(upstream.requests.first)
            #expect(request.method == "PUT")
            #expect(request.uri == "/base/legacy/main%20st/order.php")
            #expect(request.body == Array("item=A+1&qty=7&tags%5B%5D=x&tags%5B%5D=y".utf8))
            #expect(request.header("Content-Type") == ["application/x-www-form-urlencoded"])
            #expect(request.header("Content-Length") == ["40"])
        }
    }

    /// `Expect: 100-continue` is the gateway's to answer: the client gets its
    /// 100 at once (no waiting out curl's one-second timeout), the upstream
    /// never sees the expectation, and a body too large for a buffering route
    /// is refused before it is sent.
    @Test func expectContinueIsAnsweredByTheGateway() async throws {
        let routes = Self.passThrough + "\n" + """
              - {name: form, match: {prefix: /form}, upstream: legacy, rewrite: {encoding: form}}
            """
        try await withGateway(routes: routes, limits: "{max_body_bytes: 4096}") { gateway, upstream in
            let payload = [UInt8](repeating: 0x61, count: 10_000)
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("expect-\(getpid()).bin")
            try Data(payload).write(to: file)
            defer { try? FileManager.default.removeItem(at: file) }
            let streamed = try curl(["-v", "-H", "Expect: 100-continue", "--data-binary", "@\(file.path)", "\(gateway.base)/api/upload"])
            #expect(streamed.err.contains("< HTTP/1.1 100 Continue"))
            #expect(streamed.err.contains("< HTTP/1.1 200 OK"))
            let request = try #require(upstream.requests.first)
            #expect(request.header("Expect").isEmpty)
            #expect(request.body == payload)
            let refused = try curl(["-v", "-H", "Expect: 100-continue", "-H", "Content-Type: application/json",
                                    "--data-binary", "@\(file.path)", "\(gateway.base)/form"])
            #expect(!refused.err.contains("100 Continue"))
            #expect(refused.err.contains("< HTTP/1.1 413"))
            #expect(refused.text.contains("urn:gatewayd:problem:body-too-large"))
            #expect(upstream.requests.count == 1)
        }
    }

    /// A body over `max_body_bytes` on a buffering route is refused at once
    /// (by its length, or as soon as its chunks pass the limit), and the
    /// client reads the whole 413 although it was still sending: the HTTP/1.1
    /// connection closes lingering, an HTTP/2 stream is reset with NO_ERROR.
    @Test func oversizedBodiesAreRefusedAtOnce() async throws {
        let routes = Self.passThrough + "\n" + """
              - {name: form, match: {prefix: /form}, upstream: legacy, rewrite: {encoding: form}}
            """
        try await withGateway(routes: routes, limits: "{max_body_bytes: 4096}") { gateway, upstream in
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("oversized-\(getpid()).json")
            try Data(repeating: UInt8(ascii: " "), count: 8 << 20).write(to: file)
            defer { try? FileManager.default.removeItem(at: file) }
            let json = ["-H", "Content-Type: application/json", "--data-binary", "@\(file.path)", "\(gateway.base)/form"]
            for (name, flags) in [("length", ["-H", "Expect:"]), ("chunked", ["-H", "Expect:", "-H", "Transfer-Encoding: chunked"]),
                                  ("h2c", ["--http2-prior-knowledge"])] {
                let refused = try curl(["-i"] + flags + json).text
                #expect(refused.hasPrefix("HTTP/1.1 413 ") || name == "h2c" && refused.hasPrefix("HTTP/2 413 "), "\(name): \(refused.prefix(200))")
                #expect(refused.hasSuffix(#""detail":"the body is larger than this gateway accepts (4096 bytes)","route":"form"}"#), "\(name)")
            }
            #expect(upstream.requests.isEmpty)
        }
    }

    @Test func h2cWithCurlAndNghttpReachTheSameUpstream() async throws {
        let upstream = RecordingUpstream { request in .respond(status: 200, headers: [("X-Seen", request.uri)], body: Array("h2 ok".utf8)) }
        try await withGateway(routes: Self.passThrough, upstream: upstream) { gateway, upstream in
            let viaCurl = try curl(["-i", "--http2-prior-knowledge", "\(gateway.base)/api/h2?q=1", "-H", "X-Request-Id: h2-1"])
            #expect(viaCurl.text.hasPrefix("HTTP/2 200"))
            #expect(viaCurl.text.contains("x-seen: /base/api/h2?q=1\r\n"))
            #expect(viaCurl.text.hasSuffix("h2 ok"))
            let viaNghttp = try runPeer("/usr/bin/nghttp", ["-n", "-v", "-H", "x-custom: c", "\(gateway.base)/api/nghttp"])
            #expect(viaNghttp.status == 0)
            #expect(viaNghttp.text.contains(":status: 200"))
            let requests = upstream.requests
            #expect(requests.map(\.uri) == ["/base/api/h2?q=1", "/base/api/nghttp"])
            #expect(requests[0].header("X-Request-Id") == ["h2-1"])
            #expect(requests[1].header("x-custom") == ["c"])
            #expect(requests.allSatisfy { $0.header("Host") == ["127.0.0.1:\(upstream.port)"] && $0.header("X-Injected") == ["yes"] })
        }
    }

    /// Twelve calls at once over one HTTP/2 connection to an upstream with
    /// `max_connections: 4`: four connections are opened, the other calls
    /// wait for one to be released, and all are answered.
    @Test func maxConnectionsBoundsTheUpstreamConnections() async throws {
        let upstream = RecordingUpstream { request in
            .respond(status: 200, headers: [], body: Array(request.uri.utf8), delay: .milliseconds(200))
        }
        try await withGateway(routes: Self.passThrough, upstream: upstream) { gateway, upstream in
            let client = try NGHTTP2Client(port: gateway.port)
            let streams = (1...12).map { client.submit(method: "GET", path: "/api/call/\($0)") }
            client.run(seconds: 10) { c in streams.allSatisfy { c.responses[$0]?.closed == true } }
            for (i, stream) in streams.enumerated() {
                #expect(client.responses[stream]?.status == "200")
                #expect(String(decoding: client.responses[stream]?.body ?? [], as: UTF8.self) == "/base/api/call/\(i + 1)")
            }
            #expect(upstream.requests.count == 12)
            #expect(upstream.connections == 4)
        }
    }

    @Test func upstreamConnectionsAreReused() async throws {
        try await withGateway(routes: Self.passThrough) { gateway, upstream in
            _ = try curl(["\(gateway.base)/api/1", "\(gateway.base)/api/2", "\(gateway.base)/api/3"])
            _ = try curl(["\(gateway.base)/api/4"])
            #expect(upstream.requests.count == 4)
            #expect(upstream.connections == 1)
        }
    }

    @Test func upstreamFailuresAreProblems() async throws {
        let upstream = RecordingUpstream { request in
            switch request.uri {
            case "/base/api/slow": .respond(status: 200, headers: [], body: [], delay: .seconds(3))
            case "/base/api/cut": .cutShort(bodyPrefix: Array("partial".utf8), declaredLength: 100)
            default: .close
            }
        }
        let routes = Self.passThrough + """

              - {name: slow, match: {prefix: /slow}, upstream: legacy, timeout: 300ms, rewrite: {path: /api/slow}}
              - {name: dead, match: {prefix: /dead}, upstream: dead}
            """
        try await withGateway(routes: routes, upstream: upstream) { gateway, _ in
            let refused = try curl(["-i", "\(gateway.base)/dead"]).text
            #expect(refused.hasPrefix("HTTP/1.1 502 Bad Gateway\r\n"))
            #expect(refused.contains(#""type":"urn:gatewayd:problem:upstream-connect-failure""#))
            #expect(refused.contains(#""route":"dead""#))
            let slow = try curl(["-i", "\(gateway.base)/slow"]).text
            #expect(slow.hasPrefix("HTTP/1.1 504 Gateway Timeout\r\n"))
            #expect(slow.contains(#""route":"slow""#))
            let closed = try curl(["-i", "\(gateway.base)/api/close"]).text
            #expect(closed.hasPrefix("HTTP/1.1 502 Bad Gateway\r\n"))
            #expect(closed.contains(#""type":"urn:gatewayd:problem:upstream-reset""#))
            // Cut short after the head: the client must see a broken answer, not a short one.
            let cut = try curl(["\(gateway.base)/api/cut"])
            #expect(cut.status == 18)  // CURLE_PARTIAL_FILE
        }
    }

    @Test func badRequestsAreRefused() async throws {
        try await withGateway(routes: Self.passThrough, limits: "{max_header_bytes: 2048}") { gateway, upstream in
            let big = try curl(["-i", "\(gateway.base)/api/x", "-H", "X-Big: " + String(repeating: "b", count: 4000)]).text
            #expect(big.hasPrefix("HTTP/1.1 431 Request Header Fields Too Large\r\n"))
            let absolute = try curl(["-i", "--request-target", "http://elsewhere.example/api/x", "\(gateway.base)/"]).text
            #expect(absolute.hasPrefix("HTTP/1.1 400 Bad Request\r\n"))
            let smuggled = try rawExchange(port: gateway.port, Array(
                "POST /api/x HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /api/admin HTTP/1.1\r\nHost: a\r\n\r\n".utf8))
            #expect(smuggled.hasPrefix("HTTP/1.1 400 Bad Request\r\n"))
            #expect(smuggled.contains("Content-Type: application/problem+json\r\n"))
            // Answered by the gateway itself, as an origin server: with its clock.
            let date = smuggled.components(separatedBy: "\r\nDate: ").dropFirst().first?.components(separatedBy: "\r\n").first
            #expect(date.flatMap(HTTPDate.parse).map { abs($0 - HTTPDate.now()) < 60 } == true)
            #expect(smuggled.contains("urn:gatewayd:problem:malformed-request"))
            #expect(!smuggled.contains("200 OK"))
            let badChunk = try rawExchange(port: gateway.port, Array(
                "POST /api/x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n".utf8))
            #expect(badChunk.hasPrefix("HTTP/1.1 400 Bad Request\r\n"))
            let twoLengths = try rawExchange(port: gateway.port, Array(
                "POST /api/x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd".utf8))
            #expect(twoLengths.hasPrefix("HTTP/1.1 400 Bad Request\r\n"))
            // Two Hosts: routing and the upstream could read different ones.
            let twoHosts = try rawExchange(port: gateway.port, Array("GET /api/x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n".utf8))
            #expect(twoHosts.hasPrefix("HTTP/1.1 400 Bad Request\r\n") && twoHosts.contains("more than one Host field"))
            // ... and each of those connections was closed by the gateway, not left open.
            for answer in [smuggled, badChunk, twoLengths, twoHosts] { #expect(!answer.hasSuffix("<timeout>")) }
            #expect(upstream.requests.isEmpty)
            // Garbage pipelined behind a valid request: that request is answered
            // in full, then the garbage gets its 400 and the connection closes.
            let behind = try rawExchange(port: gateway.port, Array("GET /api/ok HTTP/1.1\r\nHost: a\r\n\r\nNOT HTTP AT ALL\r\n\r\n".utf8))
            #expect(behind.hasPrefix("HTTP/1.1 200 OK\r\n"))
            let garbage = behind.components(separatedBy: "HTTP/1.1 400 Bad Request\r\n")
            #expect(garbage.count == 2 && !garbage[0].contains("Connection: close") && garbage[1].contains("Connection: close\r\n"))
            #expect(garbage.count == 2 && garbage[1].contains("urn:gatewayd:problem:malformed-request"))
            #expect(!behind.hasSuffix("<timeout>"))
            #expect(upstream.requests.map(\.uri) == ["/base/api/ok"])
        }
    }

    /// A request body that stops coming is answered 408 after `idle_timeout`
    /// and the connection (HTTP/1.1) or stream (HTTP/2) ends: never a hung call.
    @Test func stalledRequestBodiesTimeOut() async throws {
        let routes = Self.passThrough + "\n" + """
              - {name: form, match: {prefix: /form}, upstream: legacy, rewrite: {encoding: form}}
            """
        try await withGateway(routes: routes, limits: "{idle_timeout: 300ms}") { gateway, upstream in
            let stalled = try rawExchange(port: gateway.port, Array(
                "POST /form HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"a\":".utf8), timeout: 5)
            #expect(stalled.hasPrefix("HTTP/1.1 408 Request Timeout\r\n"))
            #expect(stalled.contains("urn:gatewayd:problem:body-timeout"))
            #expect(!stalled.hasSuffix("<timeout>"))
            let client = try NGHTTP2Client(port: gateway.port)
            let headers = client.encodeHeaderBlock([(":method", "POST"), (":path", "/form"), (":scheme", "http"), (":authority", "a"),
                                                    ("content-type", "application/json")])
            client.sendRaw(NGHTTP2Client.frame(type: 0x1, flags: 0x4, stream: 1, payload: headers)
                + NGHTTP2Client.frame(type: 0x0, flags: 0, stream: 1, payload: Array(#"{"a":"#.utf8)))
            // The response first; the stream is reset once idle_timeout passed again without the rest.
            client.readRaw(seconds: 3) { $0.rawFrames.contains { $0.type == 0x3 && $0.stream == 1 } }
            #expect(client.rawFrames.contains { $0.type == 0x1 && $0.stream == 1 })
            #expect(client.rawFrames.contains { $0.type == 0x3 && $0.stream == 1 && $0.errorCode == 0 })
            #expect(upstream.requests.isEmpty)
        }
    }

    @Test func slowSendersAndIdleConnectionsAreDisconnected() async throws {
        try await withGateway(routes: Self.passThrough, limits: "{header_timeout: 300ms, idle_timeout: 300ms}") { gateway, upstream in
            // A head that never completes: closed after header_timeout, nothing forwarded.
            let slow = try rawExchange(port: gateway.port, Array("GET /api/x HTTP/1.1\r\nHost: a\r\nX-Slow: ".utf8), timeout: 5)
            #expect(slow.isEmpty)
            // A client that connects and sends nothing at all: closed too.
            #expect(try rawExchange(port: gateway.port, [], timeout: 5).isEmpty)
            // A keep-alive connection left idle after its answer: closed after idle_timeout.
            let idle = try rawExchange(port: gateway.port, Array("GET /api/x HTTP/1.1\r\nHost: a\r\n\r\n".utf8), timeout: 5)
            #expect(idle.hasPrefix("HTTP/1.1 200 OK\r\n"))
            #expect(idle.hasSuffix("ok"))
            #expect(upstream.requests.map(\.uri) == ["/base/api/x"])
        }
    }

    @Test func http2UpstreamMultiplexesCallsOnOneConnection() async throws {
        let upstream = RecordingUpstream(http2: true) { request in
            .respond(status: 200, headers: [("x-seen", request.uri)], body: request.body.isEmpty ? Array("h2 upstream".utf8) : request.body)
        }
        let port = try await upstream.start()
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            upstreams: {modern: {url: "http://127.0.0.1:\(port)/v2", http2: true}}
            routes: [{name: modern, upstream: modern, headers: {set: {X-Injected: "yes"}}}]
            """)
        let results = try await withThrowingTaskGroup(of: String.self) { group in
            for i in 1...8 { group.addTask { try curl(["\(gateway.base)/item/\(i)"]).text } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == 8)
        #expect(results.allSatisfy { $0 == "h2 upstream" })
        let posted = try curl(["-i", "\(gateway.base)/upload", "--data-binary", "payload bytes"]).text
        #expect(posted.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(posted.lowercased().contains("x-seen: /v2/upload\r\n"))
        #expect(posted.hasSuffix("payload bytes"))
        let requests = upstream.requests
        #expect(requests.count == 9)
        #expect(Set(requests.map(\.uri)) == Set((1...8).map { "/v2/item/\($0)" } + ["/v2/upload"]))
        #expect(requests.allSatisfy { $0.header("x-injected") == ["yes"] && $0.header("host") == ["127.0.0.1:\(port)"] })
        #expect(upstream.connections == 1)
    }
}
