import Foundation
import NIOConcurrencyHelpers
import Testing
@testable import Gateway

/// Several real upstream sockets behind one upstream: balance, health
/// checks, validator-driven outlier ejection, retries to another endpoint,
/// panic mode, circuit breakers and a reload, counted where the requests landed.
@Suite(.ownThreads) struct EndpointsWireTests {
    static func upstreams(_ count: Int, answer: @escaping @Sendable (Int, RecordingUpstream.Request) -> RecordingUpstream.Reply = { _, _ in
        .respond(status: 200, headers: [("Content-Type", "application/json")], body: Array(#"{"ok":true}"#.utf8))
    }) async throws -> ([RecordingUpstream], [Int]) {
        var upstreams: [RecordingUpstream] = [], ports: [Int] = []
        for index in 0..<count {
            let upstream = RecordingUpstream { answer(index, $0) }
            ports.append(try await upstream.start())
            upstreams.append(upstream)
        }
        return (upstreams, ports)
    }

    static func endpoints(_ ports: [Int]) -> String { "[" + ports.map { "\"http://127.0.0.1:\($0)\"" }.joined(separator: ", ") + "]" }

    /// `n` calls on one keep-alive connection (curl); their status codes.
    static func calls(_ n: Int, _ url: String, headers: [String] = []) throws -> [String] {
        let result = try curl(["-s", "-w", "%{http_code}\n"] + headers.flatMap { ["-H", $0] } + (0..<n).flatMap { _ in ["-o", "/dev/null", url] })
        return result.text.split(separator: "\n").map(String.init)
    }

    static func upstreamsJSON(_ gateway: GatewayHarness) throws -> [[String: Any]] {
        try JSONSerialization.jsonObject(with: Data(gateway.server.upstreamsJSON().utf8)) as? [[String: Any]] ?? []
    }

    static func endpointStates(_ gateway: GatewayHarness) throws -> [[String: Any]] {
        try upstreamsJSON(gateway).first?["endpoints"] as? [[String: Any]] ?? []
    }

    @Test(arguments: [Balance.roundRobin, .leastRequest, .random])
    func eachBalanceSpreadsCallsOverTheEndpoints(balance: Balance) async throws {
        let (upstreams, ports) = try await Self.upstreams(3)
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            logging: {access_log: false}
            upstreams: {app: {endpoints: \(Self.endpoints(ports)), balance: \(balance.rawValue)}}
            routes: [{name: app, upstream: app}]
            """, threads: 1)
        let codes = try Self.calls(1000, "\(gateway.base)/spread")
        #expect(codes.count == 1000 && codes.allSatisfy { $0 == "200" })
        let counts = upstreams.map(\.requests.count)
        #expect(counts.reduce(0, +) == 1000)
        switch balance {
        case .roundRobin: #expect(counts.allSatisfy { (333...334).contains($0) }, "\(counts)")
        default: #expect(counts.allSatisfy { (233...433).contains($0) }, "\(counts)")
        }
    }

    @Test func aHealthCheckTakesAStoppedEndpointOutAndBackIn() async throws {
        let (upstreams, ports) = try await Self.upstreams(2)
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            logging: {access_log: false}
            upstreams:
              app:
                endpoints: \(Self.endpoints(ports))
                health_check: {path: /health, interval: 200ms, timeout: 200ms, unhealthy_threshold: 2, healthy_threshold: 1}
            routes: [{name: app, upstream: app}]
            """, threads: 1)
        await upstreams[1].stop()
        // unhealthy_threshold × interval (0.4 s) plus the first check's jitter and a
        // timeout, with room for a loaded machine's late timers.
        #expect(try await eventually(timeout: 3) { try Self.endpointStates(gateway).last?["healthy"] as? Bool == false })
        let before = upstreams[0].requests.filter { $0.uri == "/work" }.count
        #expect(try Self.calls(20, "\(gateway.base)/work").allSatisfy { $0 == "200" })
        #expect(upstreams[0].requests.filter { $0.uri == "/work" }.count == before + 20)
        // It comes back where it was: checked healthy again, it gets calls again.
        let back = RecordingUpstream()
        _ = try await back.start(port: ports[1])
        #expect(try await eventually(timeout: 3) { try Self.endpointStates(gateway).last?["healthy"] as? Bool == true })
        #expect(try Self.calls(20, "\(gateway.base)/work").allSatisfy { $0 == "200" })
        #expect(back.requests.filter { $0.uri == "/work" }.count == 10)
    }

    /// `200 {"error":"db down"}` passes any status rule; the route's
    /// validator refuses it, and that judgement ejects the endpoint.
    @Test(arguments: [true, false])
    func anEndpointAnsweringErrorsWith200IsEjectedByTheValidatorRule(validatorCounts: Bool) async throws {
        let (upstreams, ports) = try await Self.upstreams(2) { index, _ in
            .respond(status: 200, headers: [("Content-Type", "application/json")],
                     body: Array((index == 0 ? #"{"ok":true}"# : #"{"error":"db down"}"#).utf8))
        }
        let on = validatorCounts ? "[connect-failure, reset, timeout, 5xx, validator]" : "[connect-failure, reset, timeout, 5xx]"
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            logging: {access_log: false}
            upstreams:
              app:
                endpoints: \(Self.endpoints(ports))
                outlier: {consecutive_failures: 3, base_ejection_time: 30s, on: \(on)}
            routes: [{name: app, upstream: app, validate: [{json: {pointer: /error, absent: true}, else: fail}]}]
            """, threads: 1)
        let codes = try Self.calls(40, "\(gateway.base)/orders")
        if validatorCounts {
            #expect(upstreams[1].requests.count == 3)
            #expect(codes.filter { $0 == "502" }.count == 3)
            let state = try Self.endpointStates(gateway).last
            #expect(state?["ejected"] as? Bool == true && state?["ejections"] as? Int == 1)
        } else {
            #expect(upstreams[1].requests.count == 20)
        }
    }

    @Test func aRetryGoesToTheOtherEndpoint() async throws {
        let (upstreams, ports) = try await Self.upstreams(2) { index, _ in
            index == 0 ? .respond(status: 503, headers: [], body: Array("busy".utf8)) : .respond(status: 200, headers: [], body: Array("ok".utf8))
        }
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            logging: {access_log: false}
            upstreams: {app: {endpoints: \(Self.endpoints(ports))}}
            routes: [{name: app, upstream: app, retry: {attempts: 2, on: [503], backoff: {strategy: immediate}}}]
            """, threads: 1)
        #expect(try Self.calls(10, "\(gateway.base)/r").allSatisfy { $0 == "200" })
        // Every call reached the healthy endpoint once; none tried the busy one twice.
        #expect(upstreams[1].requests.count == 10)
        #expect(upstreams[0].requests.count <= 10)
    }

    @Test func withEveryEndpointDownCallsStillGoToThem() async throws {
        let (upstreams, ports) = try await Self.upstreams(2) { _, request in
            request.uri == "/health" ? .respond(status: 503, headers: [], body: []) : .respond(status: 200, headers: [], body: Array("ok".utf8))
        }
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            logging: {access_log: false}
            upstreams:
              app:
                endpoints: \(Self.endpoints(ports))
                health_check: {path: /health, interval: 100ms, unhealthy_threshold: 1}
            routes: [{name: app, upstream: app}]
            """, threads: 1)
        #expect(try await eventually(timeout: 3) { try Self.endpointStates(gateway).allSatisfy { $0["healthy"] as? Bool == false } })
        #expect(try Self.calls(10, "\(gateway.base)/still").allSatisfy { $0 == "200" })
        #expect(try Self.upstreamsJSON(gateway).first?["panic"] as? Bool == true)
        #expect(upstreams.allSatisfy { $0.requests.contains { $0.uri == "/still" } })
    }

    @Test func pastMaxPendingOrMaxRequestsACallGets503AtOnce() async throws {
        // The upstream holds each call long enough to be seen in flight and waiting on any machine.
        let (upstreams, ports) = try await Self.upstreams(1) { _, _ in .respond(status: 200, headers: [], body: Array("slow".utf8), delay: .seconds(300)) }
        for pending in [true, false] {
            let gateway = try await GatewayHarness.start("""
                listeners: [{address: 127.0.0.1:0}]
                logging: {access_log: false}
                upstreams: {app: {url: "http://127.0.0.1:\(ports[0])", \(pending ? "max_connections: 1, max_pending: 1" : "max_requests: 1")}}
                routes: [{name: app, upstream: app}]
                """, threads: 1)
            func count(_ key: String) throws -> Int { try Self.upstreamsJSON(gateway).first?[key] as? Int ?? -1 }
            // Started as processes at once (a Task might wait for a free thread).
            // The held calls outlast any wait below however busy the machine is; they are ended at the end.
            let call = { (path: String) in try BackgroundPeer("/usr/bin/curl", ["-s", "-i", "--max-time", "120", "\(gateway.base)\(path)"]) }
            let first = try call("/a")
            #expect(try await eventually(timeout: 30) { try count("in_flight") == 1 })
            var waiting: BackgroundPeer?
            if pending {
                waiting = try call("/b")
                #expect(try await eventually(timeout: 30) { try count("pending") == 1 })
            }
            // Refused at once, not queued until a connection frees (it would then be a 200).
            let refused = try call("/c").finish()
            #expect(refused.hasPrefix("HTTP/1.1 503 "), "pending \(pending)")
            #expect(refused.contains("Retry-After: 1") && refused.contains("urn:gatewayd:problem:upstream-overloaded"))
            // The held calls are not waited for (the upstream holds them 30 s).
            first.process.signal(SIGTERM)
            waiting?.process.signal(SIGTERM)
            #expect(!upstreams[0].requests.contains { $0.uri == "/c" })
            await gateway.stop()
        }
    }

    @Test func aReloadKeepsAnEjection() async throws {
        let (upstreams, ports) = try await Self.upstreams(2) { index, _ in
            index == 0 ? .respond(status: 200, headers: [], body: Array("ok".utf8)) : .respond(status: 500, headers: [], body: [])
        }
        let yaml = """
            listeners: [{address: 127.0.0.1:0}]
            logging: {access_log: false}
            upstreams:
              app:
                endpoints: \(Self.endpoints(ports))
                outlier: {consecutive_failures: 2, base_ejection_time: 60s}
            routes:
              - {name: app, match: {prefix: /}, upstream: app}
            """
        let gateway = try await GatewayHarness.start(yaml, threads: 1)
        _ = try Self.calls(10, "\(gateway.base)/x")
        #expect(upstreams[1].requests.count == 2)
        let reloaded = yaml.replacingOccurrences(of: "routes:\n", with: "routes:\n  - {name: other, match: {prefix: /other}, upstream: echo}\n")
        try await gateway.server.reload(try ConfigLoader.load(yaml: reloaded).config)
        #expect(try Self.endpointStates(gateway).last?["ejected"] as? Bool == true)
        #expect(try Self.calls(10, "\(gateway.base)/y").allSatisfy { $0 == "200" })
        #expect(upstreams[1].requests.count == 2)
    }
}
