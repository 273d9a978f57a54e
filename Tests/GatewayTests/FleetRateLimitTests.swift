import Foundation
import Testing
@testable import Gateway

/// `rate_limit: {scope: fleet}` as operators run it: gatewayd processes
/// sharing one real redis-server, curl as the clients, and the store
/// stopped and restarted under them.
@Suite(.serialized, .ownThreads) struct FleetRateLimitTests {
    private static func yaml(_ redis: String, requests: Int, per: String, onStoreFailure: String = "local", timeout: String = "200ms") -> String {
        """
        listeners: [{address: 127.0.0.1:0}]
        admin: {address: 127.0.0.1:0}
        logging: {access_log: false}
        store: {redis: {url: "\(redis)", timeout: \(timeout)}}
        routes:
          - name: fleet
            upstream: echo
            rate_limit: {requests: \(requests), per: \(per), scope: fleet, lease: 4, on_store_failure: \(onStoreFailure)}
        """
    }

    /// `count` calls on one kept-alive connection, as fast as curl goes
    /// (or at `rate`): each line is the status and Retry-After.
    private static func load(_ port: Int, count: Int, rate: String? = nil) throws -> BackgroundPeer {
        var arguments = ["-s", "-w", "%{http_code} %header{retry-after}\n"] + (rate.map { ["--rate", $0] } ?? [])
        for i in 0..<count { arguments += ["http://127.0.0.1:\(port)/call/\(i)", "-o", "/dev/null"] }
        return try BackgroundPeer("/usr/bin/curl", arguments)
    }

    @Test func twoGatewaysTogetherAdmitTheFleetsLimit() throws {
        let redis = try RedisServer()
        let gateways = try (0..<2).map { _ in try SpawnedGateway(yaml: Self.yaml(redis.url, requests: 40, per: "10m")) }
        defer { gateways.forEach { $0.stop() } }
        // 120 calls for a limit of 40, from both at once.
        let lines = try gateways.map { try Self.load($0.port, count: 60) }.flatMap { $0.finish().split(separator: "\n") }
        #expect(lines.count == 120)
        let admitted = lines.filter { $0.hasPrefix("200") }.count
        // Each process may admit at most one lease (4) ahead of the fleet's
        // bucket, never less than the bucket holds while it is asked.
        #expect((40...48).contains(admitted), "admitted \(admitted) of a fleet limit of 40")
        #expect(lines.allSatisfy { $0 == "200 " || ($0.hasPrefix("429 ") && Int($0.dropFirst(4)).map { $0 >= 1 } == true) },
                "every refusal is a 429 with Retry-After: \(Set(lines))")
        #expect(try redis.cli(["EXISTS", "gatewayd:rate:fleet:127.0.0.1"]) == "1\n")
        // Either process refuses now: the fleet's bucket is spent.
        for gateway in gateways {
            #expect(try runPeer("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(gateway.port)/more"]).text == "429")
        }
    }

    @Test func aStoreThatGoesAwayFailsNoCallAndIsUsedAgainOnceBack() async throws {
        let redis = try RedisServer()
        let gateways = try (0..<2).map { _ in try SpawnedGateway(yaml: Self.yaml(redis.url, requests: 10_000, per: "1s")) }
        defer { gateways.forEach { $0.stop() } }
        // 4 seconds of calls at 50 a second on each, the store stopped in the middle.
        let loads = try gateways.map { try Self.load($0.port, count: 200, rate: "50/s") }
        // Each has had an answer from the store before it goes.
        for gateway in gateways {
            let admin = try #require(gateway.adminPort)
            #expect(try await eventually(timeout: 10) {
                try runPeer("/usr/bin/curl", ["-s", "http://127.0.0.1:\(admin)/store"]).text.hasSuffix(#""state":"up"}"#)
            })
        }
        redis.stop()
        let admin = try #require(gateways[0].adminPort)
        #expect(try await eventually(timeout: 10) {
            try runPeer("/usr/bin/curl", ["-s", "http://127.0.0.1:\(admin)/store"]).text
                .hasPrefix(#"{"backend":"redis","address":"127.0.0.1:\#(redis.port)","state":"down","reason":"#)
        })
        // Back once calls have been decided without it.
        #expect(try await eventually(timeout: 10) {
            let metrics = try runPeer("/usr/bin/curl", ["-s", "http://127.0.0.1:\(admin)/metrics"]).text
            return metrics.firstMatch(of: /gatewayd_rate_limit_store_down_total\{route="fleet"\} (\d+)/).flatMap { Int($0.1) }.map { $0 >= 10 } == true
        })
        try redis.start()
        let lines = loads.flatMap { $0.finish().split(separator: "\n") }
        #expect(lines.count == 400)
        #expect(lines.allSatisfy { $0 == "200 " }, "no call failed because of the store: \(Set(lines))")
        for gateway in gateways {
            // Back within a backoff (at most 5 s), calls or not; logged once per change, not per call.
            #expect(await eventually(timeout: 15) { gateway.log.components(separatedBy: "store: connected").count == 3 }, "\(gateway.log)")
            #expect(gateway.log.components(separatedBy: "is down").count == 2, "\(gateway.log)")
            #expect(try runPeer("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(gateway.port)/after"]).text == "200")
            let metrics = try runPeer("/usr/bin/curl", ["-s", "http://127.0.0.1:\(try #require(gateway.adminPort))/metrics"]).text
            #expect(metrics.contains("\ngatewayd_store_up 1.0\n") || metrics.contains("\ngatewayd_store_up 1\n"), "\(metrics)")
            let failures = metrics.firstMatch(of: /\ngatewayd_store_failures_total (\d+)\n/).flatMap { Int($0.1) }
            #expect(failures.map { $0 >= 1 } == true, "the stop, and each reconnect refused while it lasted")
            #expect(metrics.contains(#"gatewayd_rate_limit_store_down_total{route="fleet"} "#))
        }
        #expect(try runPeer("/usr/bin/curl", ["-s", "http://127.0.0.1:\(admin)/store"]).text
            == #"{"backend":"redis","address":"127.0.0.1:\#(redis.port)","state":"up"}"#)
        // The restarted (empty) server has the bucket again: the fleet's limit is back.
        #expect(try await eventually(timeout: 10) { try redis.cli(["EXISTS", "gatewayd:rate:fleet:127.0.0.1"]) == "1\n" })
    }

    /// A gateway whose lease is full (a first call answered), then 12 calls
    /// from curl on one connection while the store holds every command
    /// for `pause` ms: each line is the status and the call's seconds.
    private static func callsWhileTheStorePauses(_ redis: RedisServer, _ gateway: SpawnedGateway, pause: Int) async throws -> [Substring] {
        let admin = try #require(gateway.adminPort)
        #expect(try runPeer("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(gateway.port)/first"]).text == "200")
        #expect(try await eventually(timeout: 10) {
            try runPeer("/usr/bin/curl", ["-s", "http://127.0.0.1:\(admin)/metrics"]).text.contains("gatewayd_store_commands_total")
                && (try redis.cli(["EXISTS", "gatewayd:rate:fleet:127.0.0.1"])) == "1\n"
        })
        #expect(try redis.cli(["CLIENT", "PAUSE", String(pause), "ALL"]) == "OK\n")
        var arguments = ["-s", "-w", "%{http_code} %{time_total}\n"]
        for i in 0..<12 { arguments += ["http://127.0.0.1:\(gateway.port)/call/\(i)", "-o", "/dev/null"] }
        return try runPeer("/usr/bin/curl", arguments).text.split(separator: "\n")
    }

    @Test func aSlowStoreHoldsTheCallPastTheLeaseAndItsCreditUntilTheRefillAnswers() async throws {
        let redis = try RedisServer()
        let gateway = try SpawnedGateway(yaml: Self.yaml(redis.url, requests: 10_000, per: "1s", timeout: "8s"))
        defer { gateway.stop() }
        // The lease (4) and its credit (4) last far less than 3 s: the 9th call finds both spent.
        let lines = try await Self.callsWhileTheStorePauses(redis, gateway, pause: 3000)
        #expect(lines.count == 12)
        #expect(lines.allSatisfy { $0.hasPrefix("200 ") }, "a slow store refuses no call: \(lines)")
        #expect(lines.contains { Double($0.dropFirst(4)).map { $0 >= 0.3 } == true }, "one call waited for the store: \(lines)")
        let metrics = try runPeer("/usr/bin/curl", ["-s", "http://127.0.0.1:\(try #require(gateway.adminPort))/metrics"]).text
        let limited = metrics.split(separator: "\n").filter { $0.hasPrefix("gatewayd_rate_limit_total") && $0.contains(#"outcome="limited""#) }
        #expect(limited.allSatisfy { $0.hasSuffix(" 0") || $0.hasSuffix(" 0.0") }, "\(limited)")
        #expect(!gateway.log.contains("is down"), "the store answered within its timeout: \(gateway.log)")
    }

    @Test func aStoreSilentPastItsTimeoutLeavesTheWaitingCallToOnStoreFailure() async throws {
        let redis = try RedisServer()
        // The credit's 5 calls after the refill is sent have its 3 s timeout to come.
        let gateway = try SpawnedGateway(yaml: Self.yaml(redis.url, requests: 10_000, per: "1s", onStoreFailure: "deny", timeout: "3s"))
        defer { gateway.stop() }
        let lines = try await Self.callsWhileTheStorePauses(redis, gateway, pause: 6000)
        #expect(lines.count == 12)
        // The lease and its credit, then refusals under `deny` once the refill went unanswered.
        #expect(lines.prefix(8).allSatisfy { $0.hasPrefix("200 ") }, "\(lines)")
        #expect(lines.dropFirst(8).allSatisfy { $0.hasPrefix("429 ") }, "\(lines)")
        #expect(await eventually(timeout: 10) { gateway.log.contains("is down") }, "\(gateway.log)")
    }

    @Test(arguments: [("local", "200"), ("deny", "429")])
    func withTheStoreDownCallsFollowOnStoreFailure(policy: String, status: String) async throws {
        // Nothing listens there (bound, never listening, held: no other test's server can be): the store is down from its first command.
        let nobody = loopbackSocket()
        defer { close(nobody.fd) }
        let gateway = try SpawnedGateway(yaml: Self.yaml("redis://127.0.0.1:\(nobody.port)", requests: 100, per: "1s",
                                                         onStoreFailure: policy))
        defer { gateway.stop() }
        let url = "http://127.0.0.1:\(gateway.port)/x"
        // The first call is admitted on credit while the store is asked.
        _ = try runPeer("/usr/bin/curl", ["-s", "-o", "/dev/null", url])
        #expect(await eventually(timeout: 10) { gateway.log.contains("is down") })
        let statuses = try runPeer("/usr/bin/curl", ["-s", "-w", "%{http_code}\n"] + Array(repeating: [url, "-o", "/dev/null"], count: 3).flatMap { $0 }).text
        #expect(statuses == String(repeating: status + "\n", count: 3))
    }
}
