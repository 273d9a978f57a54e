import Testing
@testable import Gateway

/// Retries and validators on real sockets, against an upstream that fails on cue.
@Suite(.ownThreads) struct RetryForwardingTests {
    /// Answers each path's scripted statuses in turn, then 200.
    static func flaky(_ script: [String: [Int]]) -> RecordingUpstream {
        RecordingUpstream.counting { request, n in
            let statuses = script[request.uri] ?? []
            let status = n <= statuses.count ? statuses[n - 1] : 200
            return .respond(status: status, headers: [("X-Try", "\(n)")], body: Array("try \(n): \(status)".utf8))
        }
    }

    @Test func retriesStatusesAndTransportFailuresAndHonorsMethodsAndValidators() async throws {
        let upstream = Self.flaky(["/a": [503, 503], "/b": [503, 503, 503], "/p": [503], "/v": [500]])
        let port = try await upstream.start()
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            upstreams:
              flaky: {url: "http://127.0.0.1:\(port)"}
              dead: {url: "http://127.0.0.1:1", connect_timeout: 200ms}
            routes:
              - name: checked
                match: {prefix: /v}
                upstream: flaky
                validate: [{status: 200-299, else: fail}]
              - name: dead
                match: {prefix: /dead}
                upstream: dead
                retry: {attempts: 3, backoff: {strategy: fixed, base: 10ms, jitter: false}}
              - name: flaky
                upstream: flaky
                retry: {attempts: 3, on: [503], backoff: {strategy: exponential, base: 10ms, max: 100ms, jitter: false}}
            """)

        let a = try curl(["-i", "\(gateway.base)/a"]).text
        #expect(a.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(a.hasSuffix("try 3: 200"))
        let b = try curl(["-i", "\(gateway.base)/b"]).text
        #expect(b.hasPrefix("HTTP/1.1 503 Service Unavailable\r\n"))  // tries ran out: the last answer as is
        #expect(b.hasSuffix("try 3: 503"))
        let post = try curl(["-i", "\(gateway.base)/p", "-d", "x=1"]).text
        #expect(post.hasPrefix("HTTP/1.1 503 Service Unavailable\r\n"))  // POST is not idempotent: one try
        let validated = try curl(["-i", "\(gateway.base)/v"]).text
        #expect(validated.hasPrefix("HTTP/1.1 502 Bad Gateway\r\n"))
        #expect(validated.contains(#""type":"urn:gatewayd:problem:validator-failed""#))
        #expect(validated.contains(#""detail":"the response of upstream flaky (upstream status 500) did not pass the route's checks""#))
        #expect(!validated.contains("routes[0]") && !validated.contains("validate"))
        let dead = try curl(["-i", "\(gateway.base)/dead"]).text
        #expect(dead.hasPrefix("HTTP/1.1 502 Bad Gateway\r\n"))

        let uris = upstream.requests.map(\.uri)
        #expect(uris.filter { $0 == "/a" }.count == 3)
        #expect(uris.filter { $0 == "/b" }.count == 3)
        #expect(uris.filter { $0 == "/p" }.count == 1)
        #expect(uris.filter { $0 == "/v" }.count == 1)
        #expect(upstream.requests.filter { $0.uri == "/a" }.allSatisfy { $0.header("X-Request-Id") == upstream.requests[0].header("X-Request-Id") })
    }

    @Test func bodyValidatorsAndPerTryTimeouts() async throws {
        let big = [UInt8](repeating: 0x62, count: 300_000)
        let upstream = RecordingUpstream.counting { request, n in
            switch (request.uri, n) {
            case ("/json", 1): return .respond(status: 200, headers: [("Content-Type", "application/json")], body: Array(#"{"error":"busy"}"#.utf8))
            case ("/json", _): return .respond(status: 200, headers: [("Content-Type", "application/json")], body: Array(#"{"data":[1,2]}"#.utf8))
            case ("/big", _): return .respond(status: 200, headers: [], body: big)
            case ("/slow", 1): return .respond(status: 200, headers: [], body: Array("late".utf8), delay: .seconds(2))
            default: return .respond(status: 200, headers: [], body: Array("on time".utf8))
            }
        }
        let port = try await upstream.start()
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            limits: {max_body_bytes: 100000}
            upstreams: {app: {url: "http://127.0.0.1:\(port)"}}
            routes:
              - name: slow
                match: {path: /slow}
                upstream: app
                timeout: 5s
                retry: {attempts: 2, per_try_timeout: 300ms, backoff: {strategy: immediate}}
              - name: json
                upstream: app
                retry: {attempts: 3, backoff: {strategy: immediate}}
                validate: [{json: {pointer: /error, absent: true}, else: retry}]
            """)

        let json = try curl(["-i", "\(gateway.base)/json"]).text
        #expect(json.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(json.hasSuffix(#"{"data":[1,2]}"#))
        // Larger than the body limit: not held whole, passed through intact.
        let large = try curl(["\(gateway.base)/big"])
        #expect(large.out == big)
        let slow = try curl(["-i", "\(gateway.base)/slow"]).text
        #expect(slow.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(slow.hasSuffix("on time"))
        let uris = upstream.requests.map(\.uri)
        #expect(uris.filter { $0 == "/json" }.count == 2)
        #expect(uris.filter { $0 == "/big" }.count == 1)
        #expect(uris.filter { $0 == "/slow" }.count == 2)
    }

    @Test func resetsAreRetriedAndSlowTriesEndAtTheDeadline() async throws {
        let upstream = RecordingUpstream.counting { request, n in
            switch (request.uri, n) {
            case ("/reset", 1): return .close
            case ("/cut", 1): return .cutShort(bodyPrefix: Array("part".utf8), declaredLength: 100)
            case ("/hang", _): return .respond(status: 200, headers: [], body: Array("too late".utf8), delay: .seconds(5))
            default: return .respond(status: 200, headers: [], body: Array("try \(n)".utf8))
            }
        }
        let port = try await upstream.start()
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            upstreams: {app: {url: "http://127.0.0.1:\(port)"}}
            routes:
              - name: hang
                match: {path: /hang}
                upstream: app
                timeout: 1s
                retry: {attempts: 5, per_try_timeout: 400ms, backoff: {strategy: immediate}}
              - name: app
                upstream: app
                retry: {attempts: 2, backoff: {strategy: immediate}}
            """)

        // Closed before any answer: retried on a new connection.
        #expect(try curl(["\(gateway.base)/reset"]).text == "try 2")
        // Cut short after the head went to the client: nothing can be retried,
        // and the client sees the connection end early, never a complete answer.
        let cut = try curl(["-i", "\(gateway.base)/cut"])
        #expect(cut.status == 18)  // curl: partial file
        // Two 400ms tries fit in the 1s deadline, a third would not: 504.
        let hang = try curl(["-i", "\(gateway.base)/hang"]).text
        #expect(hang.hasPrefix("HTTP/1.1 504 Gateway Timeout\r\n"))
        #expect(hang.contains(#""type":"urn:gatewayd:problem:upstream-timeout""#))
        let uris = upstream.requests.map(\.uri)
        #expect(uris.filter { $0 == "/reset" }.count == 2)
        #expect(uris.filter { $0 == "/cut" }.count == 1)
        #expect(uris.filter { $0 == "/hang" }.count == 2)
    }

    @Test func refusedHTTP2StreamsAreRetried() async throws {
        let upstream = RecordingUpstream.counting(http2: true) { request, n in
            n == 1 || request.uri == "/always" ? .refuseStream : .respond(status: 200, headers: [], body: Array("try \(n)".utf8))
        }
        let port = try await upstream.start()
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            upstreams: {modern: {url: "http://127.0.0.1:\(port)", http2: true}}
            routes:
              - name: modern
                upstream: modern
                retry: {attempts: 2, on: [refused-stream], backoff: {strategy: immediate}}
            """)

        // REFUSED_STREAM means the upstream did not process it: tried again.
        #expect(try curl(["\(gateway.base)/once"]).text == "try 2")
        // Refused every time: a 502 naming the refusal.
        let always = try curl(["-i", "\(gateway.base)/always"]).text
        #expect(always.hasPrefix("HTTP/1.1 502 Bad Gateway\r\n"))
        #expect(always.contains(#""type":"urn:gatewayd:problem:upstream-refused-stream""#))
        #expect(upstream.requests.map(\.uri) == ["/once", "/once", "/always", "/always"])
    }

    @Test func retryBudgetStopsARetryStorm() async throws {
        let upstream = RecordingUpstream { _ in .respond(status: 503, headers: [], body: Array("down".utf8)) }
        let port = try await upstream.start()
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            upstreams: {app: {url: "http://127.0.0.1:\(port)"}}
            routes:
              - name: app
                upstream: app
                retry: {attempts: 3, on: [503], backoff: {strategy: immediate}, budget: {ratio: 0.1, window: 1m, min_retries: 2}}
            """)
        for _ in 1...5 {
            #expect(try curl(["-i", "\(gateway.base)/x"]).text.hasPrefix("HTTP/1.1 503 Service Unavailable\r\n"))
        }
        // 5 calls; the budget allows max(2, 10% of calls) = 2 retries in the window.
        #expect(upstream.requests.count == 7)
        // Each refused answer was read to its end: every try on one kept-alive connection.
        #expect(upstream.connections == 1)
    }
}
