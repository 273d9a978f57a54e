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
}
