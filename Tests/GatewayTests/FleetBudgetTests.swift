import Foundation
import Testing
@testable import Gateway

/// `retry.budget: {scope: fleet}`: two gatewayd processes on one real
/// redis-server share one budget of retries against an upstream that fails
/// every call.
@Suite(.serialized, .ownThreads) struct FleetBudgetTests {
    /// A route that retries a 503 once, within a fleet budget of 1% of calls or `minRetries`.
    static func yaml(store: String, timeout: String, upstream: Int, minRetries: Int) -> String {
        """
        listeners: [{address: 127.0.0.1:0}]
        logging: {access_log: false}
        store: {redis: {url: "\(store)", timeout: \(timeout)}}
        upstreams: {app: {url: "http://127.0.0.1:\(upstream)"}}
        routes:
          - name: flaky
            upstream: app
            retry: {attempts: 2, on: [503], backoff: {strategy: immediate},
                    budget: {ratio: 0.01, min_retries: \(minRetries), window: 1m, scope: fleet}}
        """
    }

    static func failingUpstream() -> RecordingUpstream {
        RecordingUpstream { _ in .respond(status: 503, headers: [], body: Array("down".utf8)) }
    }

    @Test func twoGatewaysShareOneRetryBudget() async throws {
        // The budget's window is the wall clock's minute: a run across its
        // turn would start a second budget (as it should) and count twice.
        // Starting early in a minute keeps the whole run in one.
        try #require(await eventually(timeout: 30) { Date().timeIntervalSince1970.truncatingRemainder(dividingBy: 60) < 40 })
        let redis = try RedisServer()
        let failing = Self.failingUpstream()
        let port = try await failing.start()
        // Time enough to answer on a machine short of CPU: a store that times out is down, and the local budgets decide.
        let yaml = Self.yaml(store: redis.url, timeout: "2s", upstream: port, minRetries: 4)
        let gateways = try (0..<2).map { _ in try SpawnedGateway(yaml: yaml) }
        defer { gateways.forEach { $0.stop() } }
        // 10 calls on each, 10 a second, both at once: 20 calls, whose 1%
        // is less than min_retries: 4 retries for the fleet (8 if each
        // process counted alone).
        let loads = try gateways.map { gateway in
            try BackgroundPeer("/usr/bin/curl", ["-s", "--rate", "10/s", "-w", "%{http_code}\n"]
                + (0..<10).flatMap { ["http://127.0.0.1:\(gateway.port)/x/\($0)", "-o", "/dev/null"] })
        }
        let statuses = loads.flatMap { $0.finish().split(separator: "\n") }
        #expect(statuses.count == 20 && statuses.allSatisfy { $0 == "503" })
        let retries = failing.requests.count - 20
        // A process may take a retry before it hears of the other's last
        // (once or twice each as it runs out): never the 8 of two local budgets.
        #expect((4...7).contains(retries), "\(retries) retries for a fleet budget of 4")
        let window = Int(Date().timeIntervalSince1970 / 60)
        let counted = try redis.cli(["HGET", "gatewayd:budget:flaky:\(window)", "retries"])
        let all = try redis.cli(["HGETALL", "gatewayd:budget:flaky:\(window)"])
        #expect(counted == "\(retries)\n" || counted == "\n", "the store counted every retry (unless the window just turned): \(all)")
    }

    @Test func withTheStoreDownTheBudgetStillHolds() async throws {
        // The same window as above, kept locally while the store is down: a run across a minute's turn
        // would rightly grant a second budget (seen once on a loaded machine: 4 retries for 3).
        try #require(await eventually(timeout: 30) { Date().timeIntervalSince1970.truncatingRemainder(dividingBy: 60) < 40 })
        let failing = Self.failingUpstream()
        let port = try await failing.start()
        // Nothing listens where the store should be (bound, never listening, held: no other test's server can be there).
        let nobody = loopbackSocket()
        defer { close(nobody.fd) }
        let gateway = try SpawnedGateway(yaml: Self.yaml(store: "redis://127.0.0.1:\(nobody.port)", timeout: "100ms", upstream: port,
                                                         minRetries: 3))
        defer { gateway.stop() }
        let firstWindow = Int(Date().timeIntervalSince1970 / 60)
        let statuses = try runPeer("/usr/bin/curl", ["-s", "-w", "%{http_code}\n"]
            + (0..<10).flatMap { ["http://127.0.0.1:\(gateway.port)/x/\($0)", "-o", "/dev/null"] }).text
        // A machine slow enough to run the calls past the minute's turn rightly grants the new window its own budget.
        let windows = Int(Date().timeIntervalSince1970 / 60) - firstWindow + 1
        // Every call answered as the upstream did; the process's own count keeps the budget.
        #expect(statuses == String(repeating: "503\n", count: 10))
        let retries = failing.requests.count - 10
        #expect(windows == 1 ? retries == 3 : (3...3 * windows).contains(retries), "\(retries) retries for a budget of 3 in \(windows) windows")
        #expect(gateway.log.contains("is down"), "\(gateway.log)")
    }
}
