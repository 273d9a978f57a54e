import MetricsTestKit
import Testing
@testable import Gateway

/// What the metrics count, read from swift-metrics' test kit.
@Suite struct MetricsTests {
    @Test func echoCallsAreTriesAndUnroutedCallsMakeNoTrySeries() async throws {
        let metrics = TestMetrics()
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            routes: [{name: echoed, match: {prefix: /e}, upstream: echo}]
            """, metrics: metrics)
        defer { Task { await gateway.stop() } }
        #expect(try curl(["-s", "-o", "/dev/null", "-w", "%{http_code}", "\(gateway.base)/e/1"]).text == "200")
        #expect(try curl(["-s", "-o", "/dev/null", "-w", "%{http_code}", "\(gateway.base)/nowhere"]).text == "404")
        #expect(try metrics.expectCounter("gatewayd_upstream_tries_total", [("route", "echoed"), ("upstream", "echo")]).totalValue == 1)
        #expect(metrics.counters.allSatisfy { $0.label != "gatewayd_upstream_tries_total" || $0.dimensions.allSatisfy { $0.1 != "-" } })
        #expect(try metrics.expectCounter("gatewayd_requests_total", [("route", "-"), ("method", "GET"), ("status_class", "4xx")]).totalValue == 1)
    }
}
