import MetricsTestKit
import NIOCore
import Testing
@testable import Gateway

/// What the metrics count, read from swift-metrics' test kit.
@Suite(.ownThreads) struct MetricsTests {
    /// The help lines describe exactly the metrics docs/operations.md lists.
    @Test func everyDocumentedMetricHasHelpText() throws {
        let doc = try String(contentsOf: ConfigFilesTests.root.appendingPathComponent("docs/operations.md"), encoding: .utf8)
        let documented = Set(doc.matches(of: /`(gatewayd_[a-z_]+)`/).map { String($0.output.1) })
        #expect(documented == Set(MetricHelp.texts.keys))
    }

    @Test func echoCallsAreTriesAndUnroutedCallsMakeNoTrySeries() async throws {
        let metrics = TestMetrics()
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            routes: [{name: echoed, match: {prefix: /e}, upstream: echo}]
            """, metrics: metrics)
        #expect(try curl(["-s", "-o", "/dev/null", "-w", "%{http_code}", "\(gateway.base)/e/1"]).text == "200")
        #expect(try curl(["-s", "-o", "/dev/null", "-w", "%{http_code}", "\(gateway.base)/nowhere"]).text == "404")
        #expect(try metrics.expectCounter("gatewayd_upstream_tries_total", [("route", "echoed"), ("upstream", "echo")]).totalValue == 1)
        #expect(metrics.counters.allSatisfy { $0.label != "gatewayd_upstream_tries_total" || $0.dimensions.allSatisfy { $0.1 != "-" } })
        #expect(try metrics.expectCounter("gatewayd_requests_total", [("route", "-"), ("method", "GET"), ("status_class", "4xx")]).totalValue == 1)
    }

    /// The common methods' counters sit in fixed slots, the rest in a map:
    /// each (method, status class) pair counts into its own series, once
    /// made, also when several threads make it at the same time.
    @Test func callsCountByMethodAndStatusClassFromEveryThread() async throws {
        let metrics = TestMetrics()
        let route = RouteMetrics(route: "r", upstream: "u", factory: metrics)
        let calls: [(String, Int)] = [("GET", 200), ("GET", 204), ("HEAD", 304), ("POST", 201), ("PUT", 500), ("DELETE", 404),
                                      ("PATCH", 199), ("OPTIONS", 200), ("PROPFIND", 207), ("get", 200), ("GET", 499), ("GET", 600)]
        let now = NIODeadline.now()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask { for (method, status) in calls { route.callEnded(method: method, status: status, started: now, now: now) } }
            }
        }
        var expected: [String: Int] = [:]
        for (method, status) in calls { expected["\(method) \(status / 100)xx", default: 0] += 8 }
        var counted: [String: Int] = [:]
        for counter in metrics.counters where counter.label == "gatewayd_requests_total" {
            let dimensions = Dictionary(uniqueKeysWithValues: counter.dimensions)
            #expect(dimensions["route"] == "r")
            let key = "\(dimensions["method"] ?? "?") \(dimensions["status_class"] ?? "?")"
            #expect(counted[key] == nil, "one series per pair: \(key)")
            counted[key] = Int(counter.totalValue)
        }
        #expect(counted == expected)
    }

    /// The metrics count the events the access line counts: a try that
    /// failed to connect is a try; a `retry.on` condition is no validator.
    @Test func metricsCountWhatTheAccessLineCounts() async throws {
        let metrics = TestMetrics()
        let upstream = RecordingUpstream.counting { _, n in .respond(status: n == 1 ? 503 : 200, headers: [], body: []) }
        let port = try await upstream.start()
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            upstreams:
              dead: {url: "http://127.0.0.1:\(freeLoopbackPort())", connect_timeout: 500ms}
              app: {url: "http://127.0.0.1:\(port)"}
            routes:
              - {name: dead, match: {prefix: /dead}, upstream: dead, retry: {attempts: 1}}
              - {name: flaky, upstream: app, retry: {attempts: 2, on: [503], backoff: {strategy: immediate}}, validate: [{status: 200-599}]}
            """, metrics: metrics)
        #expect(try curl(["-o", "/dev/null", "-w", "%{http_code}", "\(gateway.base)/dead"]).text == "502")
        #expect(try metrics.expectCounter("gatewayd_upstream_tries_total", [("route", "dead"), ("upstream", "dead")]).totalValue == 1)
        #expect(try curl(["-o", "/dev/null", "-w", "%{http_code}", "\(gateway.base)/x"]).text == "200")
        #expect(try metrics.expectCounter("gatewayd_upstream_tries_total", [("route", "flaky"), ("upstream", "app")]).totalValue == 2)
        let validators = metrics.counters.filter { $0.label == "gatewayd_validator_outcomes_total" }
        #expect(!validators.contains { $0.dimensions.contains { $0.0 == "validator" && $0.1.hasPrefix("status-") } },
                "\(validators.map(\.dimensions))")
    }

    /// Per-try lines are the `gatewayd.tries` logger's, their numbers JSON numbers.
    @Test func triesHaveTheirOwnLoggerAndTypedNumbers() throws {
        let line = StructuredLogHandler.json([("logger", .string("gatewayd.tries")), ("try", StructuredLogHandler.value(.stringConvertible(2))),
                                              ("delay_ms", StructuredLogHandler.value(.stringConvertible(25))),
                                              ("route", StructuredLogHandler.value(.string("r")))])
        #expect(String(decoding: line, as: UTF8.self) == #"{"logger":"gatewayd.tries","try":2,"delay_ms":25,"route":"r"}"#)
        let gateway = try SpawnedGateway(yaml: """
            listeners: [{address: 127.0.0.1:0}]
            logging: {format: json}
            upstreams: {dead: {url: "http://127.0.0.1:\(freeLoopbackPort())", connect_timeout: 500ms}}
            routes: [{name: dead, upstream: dead, retry: {attempts: 2, backoff: {strategy: immediate}}}]
            """)
        defer { gateway.stop() }
        #expect(try curl(["-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(gateway.port)/x"]).text == "502")
        let tries = { gateway.log.split(separator: "\n").filter { $0.contains(#""msg":"try""#) } }
        #expect(eventuallyBlocking(timeout: 10) { tries().count == 2 }, "\(gateway.log)")
        #expect(tries().allSatisfy { $0.contains(#""logger":"gatewayd.tries""#) && $0.contains(#""try":"#) && !$0.contains(#""try":""#) }, "\(tries())")
    }
}
