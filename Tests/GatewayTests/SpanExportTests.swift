import Foundation
import Testing
@testable import Gateway

/// `tracing.export.otlp` as operators run it: a spawned gatewayd, curl as
/// the client, a recording upstream, and a receiver that decodes what
/// arrives with the official opentelemetry-proto package (grpcio's server
/// for gRPC).
@Suite(.serialized, .ownThreads) struct SpanExportTests {
    static func yaml(_ export: String, upstream: Int, extra: String = "", start: Bool = true) -> String {
        """
        listeners: [{address: 127.0.0.1:0}]
        admin: {address: 127.0.0.1:0}
        logging: {access_log: false}
        tracing: {propagate: true, start: \(start), export: {otlp: {\(export)}}}
        upstreams: {legacy: {url: "http://127.0.0.1:\(upstream)"}}
        routes:
          - {name: api, match: {prefix: /api}, upstream: legacy, retry: {attempts: 2, on: [503], backoff: {base: 1ms}}}
        \(extra)
        """
    }

    @Test(arguments: ["http/protobuf", "grpc"])
    func aCallWithOneRetryIsAServerSpanAndAClientSpanPerTry(transport: String) async throws {
        let upstream = RecordingUpstream.counting { _, n in
            n == 1 ? .respond(status: 503, headers: [], body: Array("busy".utf8)) : .respond(status: 200, headers: [], body: Array("ok".utf8))
        }
        let upstreamPort = try await upstream.start()
        let receiver = try OTLPReceiver(transport == "grpc" ? "grpc" : "http")
        defer { receiver.stop() }
        let gateway = try SpawnedGateway(yaml: Self.yaml(#"endpoint: "http://127.0.0.1:\#(receiver.port)", protocol: \#(transport), service_name: edge"#,
                                                         upstream: upstreamPort))
        defer { gateway.stop() }
        let caller = (trace: "0af7651916cd43dd8448eb211c80319c", span: "b7ad6b7169203331")
        let answer = try curl(["-w", "%{http_code}", "-o", "/dev/null", "-H", "traceparent: 00-\(caller.trace)-\(caller.span)-01",
                               "http://127.0.0.1:\(gateway.port)/api/orders?secret=1"])
        #expect(answer.text == "200")
        let spans = await receiver.spans(count: 3)
        try #require(spans.count == 3, "\(spans) \(gateway.log)")
        #expect(spans.allSatisfy { $0[string: "trace_id"] == caller.trace })
        #expect(spans.allSatisfy { ($0["resource"] as? [String: Any])?["service.name"] as? String == "edge" })
        #expect(spans.allSatisfy { $0[string: "transport"] == (transport == "grpc" ? "grpc" : "http:/v1/traces") })
        #expect(spans.allSatisfy { $0[string: "content_type"] == (transport == "grpc" ? "application/grpc" : "application/x-protobuf") })

        let server = try #require(spans.first { $0[string: "kind"] == "SPAN_KIND_SERVER" })
        #expect(server[string: "parent_span_id"] == caller.span)
        #expect(server[string: "name"] == "GET api")
        #expect(server.attributes["http.request.method"] as? String == "GET")
        #expect(server.attributes["url.path"] as? String == "/api/orders", "the query is not in the span")
        #expect(server.attributes["gatewayd.route"] as? String == "api")
        #expect(server.attributes["http.response.status_code"] as? Int == 200)
        #expect(server.attributes["gatewayd.tries"] as? Int == 2)
        #expect(server.attributes["gatewayd.outcome"] as? String == "ok")
        #expect(server[string: "status"] == "STATUS_CODE_UNSET")

        // One client span per try, children of the server span, their ids the ones that went upstream.
        let tries = spans.filter { $0[string: "kind"] == "SPAN_KIND_CLIENT" }.sorted { ($0["start"] as? Int ?? 0) < ($1["start"] as? Int ?? 0) }
        try #require(tries.count == 2)
        let received = upstream.requests.map { $0.header("traceparent") }
        #expect(received == tries.map { ["00-\(caller.trace)-\($0[string: "span_id"] ?? "")-01"] }, "\(received)")
        for (index, span) in tries.enumerated() {
            #expect(span[string: "parent_span_id"] == server[string: "span_id"])
            #expect(span[string: "name"] == "GET legacy")
            #expect(span.attributes["server.address"] as? String == "127.0.0.1")
            #expect(span.attributes["server.port"] as? Int == upstreamPort)
            #expect(span.attributes["network.peer.address"] as? String == "127.0.0.1:\(upstreamPort)")
            #expect(span.attributes["http.request.resend_count"] as? Int == (index == 0 ? nil : 1))
        }
        #expect(tries[0].attributes["http.response.status_code"] as? Int == 503)
        #expect(tries[0][string: "status"] == "STATUS_CODE_ERROR")
        #expect(tries[1].attributes["http.response.status_code"] as? Int == 200)
        #expect(tries[1][string: "status"] == "STATUS_CODE_UNSET")
        // Nested in time: the server span holds both tries, the first ends before the second starts.
        let times = { (span: [String: Any]) in (span["start"] as? Int ?? 0, span["end"] as? Int ?? 0) }
        #expect(times(server).0 <= times(tries[0]).0 && times(tries[0]).1 <= times(tries[1]).0 && times(tries[1]).1 <= times(server).1)
        #expect(abs(Double(times(server).0) / 1e9 - Date().timeIntervalSince1970) < 60, "dated by the wall clock")
        let metrics = try curl(["http://127.0.0.1:\(try #require(gateway.adminPort))/metrics"]).text
        #expect(metrics.contains("gatewayd_spans_exported_total 3"), "\(metrics)")
    }

    @Test func newTracesAreSampledAtTheRatioAndACallersChoiceIsKept() async throws {
        let upstream = RecordingUpstream()
        let upstreamPort = try await upstream.start()
        let receiver = try OTLPReceiver("http")
        defer { receiver.stop() }
        let gateway = try SpawnedGateway(yaml: Self.yaml(#"endpoint: "http://127.0.0.1:\#(receiver.port)", sample_ratio: 0"#, upstream: upstreamPort))
        defer { gateway.stop() }
        // A trace started here, not sampled: the upstream is told so, and no span is sent.
        #expect(try curl(["-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(gateway.port)/api/new"]).text == "200")
        let started = try #require(upstream.requests.first?.header("traceparent").first)
        #expect(started.hasSuffix("-00"), "\(started)")
        // A caller's sampled trace is kept sampled, and exported.
        let caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        #expect(try curl(["-o", "/dev/null", "-w", "%{http_code}", "-H", "traceparent: \(caller)", "http://127.0.0.1:\(gateway.port)/api/kept"]).text == "200")
        let spans = await receiver.spans(count: 2)
        #expect(spans.count == 2 && spans.allSatisfy { $0[string: "trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736" }, "\(spans)")
        // Sent in the same batch or after the unsampled call's would have been: none of it.
        #expect(!spans.contains { $0.attributes["url.path"] as? String == "/api/new" })
    }

    @Test func aDeadCollectorDropsSpansCountedAndCallsGoOn() async throws {
        let upstream = RecordingUpstream()
        let upstreamPort = try await upstream.start()
        let gateway = try SpawnedGateway(yaml: Self.yaml(#"endpoint: "http://127.0.0.1:\#(freeLoopbackPort())", timeout: 1s"#, upstream: upstreamPort))
        defer { gateway.stop() }
        let urls = (0..<20).flatMap { ["http://127.0.0.1:\(gateway.port)/api/\($0)", "-o", "/dev/null"] }
        #expect(try curl(["-w", "%{http_code}\n"] + urls).text == String(repeating: "200\n", count: 20))
        let admin = try #require(gateway.adminPort)
        // 20 calls, a server and a client span each: all dropped, as export failures.
        let dropped = await eventually(timeout: 10) {
            (try? curl(["http://127.0.0.1:\(admin)/metrics"]).text.contains(#"gatewayd_spans_dropped_total{reason="export-failed"} 40"#)) == true
        }
        #expect(dropped, "\((try? curl(["http://127.0.0.1:\(admin)/metrics"]))?.text ?? "")")
        // The line is written beside the count, not before it: awaited, then counted.
        #expect(await eventually(timeout: 10) { gateway.log.contains("span export to") }, "\(gateway.log)")
        #expect(gateway.log.components(separatedBy: "span export to").count == 2, "logged once: \(gateway.log)")
    }

    /// A collector that takes connections and never answers, and calls
    /// with 30 KB paths: the spans held wait within the documented bytes
    /// (16 MiB queued, 4 MiB a loop, 4 MiB in flight), the rest are dropped
    /// and counted as queue-full, and the calls go on.
    @Test func aStalledCollectorHoldsAtMostItsBytesOfSpans() async throws {
        let upstream = RecordingUpstream()
        let upstreamPort = try await upstream.start()
        let collector = loopbackSocket(listening: true)
        defer { close(collector.fd) }
        let gateway = try SpawnedGateway(yaml: Self.yaml(#"endpoint: "http://127.0.0.1:\#(collector.port)", timeout: 60s"#, upstream: upstreamPort,
                                                         extra: "limits: {max_header_bytes: 65536}"))
        defer { gateway.stop() }
        let calls = 1200
        let path = "/api/" + String(repeating: "a", count: 30_000)
        let list = FileManager.default.temporaryDirectory.appendingPathComponent("urls-\(UUID()).txt")
        try (0..<calls).map { "url = \"http://127.0.0.1:\(gateway.port)\(path)/\($0)\"\noutput = \"/dev/null\"\n" }.joined()
            .write(to: list, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: list) }
        let codes = try curl(["-w", "%{http_code}\n", "-K", list.path]).text
        #expect(codes == String(repeating: "200\n", count: calls))
        let admin = try #require(gateway.adminPort)
        // A server span of ~30 KB a call (and a small client span): at most ~24 MiB, ~840 of them, are held.
        var dropped = 0
        _ = await eventually(timeout: 10) {
            let metrics = (try? curl(["http://127.0.0.1:\(admin)/metrics"]).text) ?? ""
            dropped = metrics.firstMatch(of: /gatewayd_spans_dropped_total\{reason="queue-full"\} (\d+)/).flatMap { Int($0.output.1) } ?? 0
            return dropped >= calls - 900
        }
        #expect(dropped >= calls - 900, "queue-full drops: \(dropped)")
    }

    @Test func refreshCallsAndHealthChecksAreClientSpansOfTheirOwn() async throws {
        let app = RecordingUpstream { request in
            request.header("Authorization") == ["Bearer t1"] ? .respond(status: 200, headers: [], body: Array("ok".utf8))
                : .respond(status: 401, headers: [], body: [])
        }
        let auth = RecordingUpstream { _ in .respond(status: 200, headers: [("Content-Type", "application/json")], body: Array(#"{"t":"t1"}"#.utf8)) }
        let (appPort, authPort) = (try await app.start(), try await auth.start())
        let receiver = try OTLPReceiver("http")
        defer { receiver.stop() }
        let gateway = try SpawnedGateway(yaml: """
            listeners: [{address: 127.0.0.1:0}]
            logging: {access_log: false}
            tracing: {start: true, export: {otlp: {endpoint: "http://127.0.0.1:\(receiver.port)"}}}
            upstreams:
              app: {url: "http://127.0.0.1:\(appPort)"}
              auth: {url: "http://127.0.0.1:\(authPort)", health_check: {path: /health, interval: 200ms}}
            routes:
              - name: protected
                upstream: app
                retry: {attempts: 2}
                validate:
                  - status: 401
                    then: {refresh: {request: {upstream: auth, path: /token}, capture: {pointer: /t, header: Authorization, format: "Bearer {}"}}}
            """)
        defer { gateway.stop() }
        #expect(try curl(["-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(gateway.port)/x"]).text == "200")
        _ = await receiver.spans(count: 5)
        let spans = receiver.spans
        let server = try #require(spans.first { $0[string: "kind"] == "SPAN_KIND_SERVER" }, "\(spans)")
        let refresh = try #require(spans.first { $0.attributes["gatewayd.purpose"] as? String == "credential-refresh" }, "\(spans)")
        #expect(refresh[string: "parent_span_id"] == server[string: "span_id"] && refresh[string: "trace_id"] == server[string: "trace_id"])
        #expect(refresh[string: "name"] == "credential refresh auth")
        #expect(refresh.attributes["http.response.status_code"] as? Int == 200)
        let tokenCall = try #require(auth.requests.first { $0.uri == "/token" })
        #expect(tokenCall.header("traceparent") == ["00-\(refresh[string: "trace_id"] ?? "")-\(refresh[string: "span_id"] ?? "")-01"])
        #expect(spans.filter { $0[string: "kind"] == "SPAN_KIND_CLIENT" && $0[string: "parent_span_id"] == server[string: "span_id"] }.count == 3,
                "two tries and the refresh")
        // Health checks: each a trace of its own, named as such, its traceparent sent with it.
        let check = try #require(spans.first { $0.attributes["gatewayd.purpose"] as? String == "health-check" }, "\(spans)")
        #expect(check[string: "parent_span_id"] == "" && check[string: "name"] == "health check auth")
        #expect(auth.requests.contains { $0.uri == "/health" && $0.header("traceparent") == ["00-\(check[string: "trace_id"] ?? "")-\(check[string: "span_id"] ?? "")-01"] })
    }
}
