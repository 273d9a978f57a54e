import Testing
@testable import Gateway

/// Endpoint health and picking as values: checks, outlier ejections and
/// panic mode in every order that matters, without sockets or sleeps.
@Suite(.ownThreads) struct EndpointHealthTests {
    typealias Health = EndpointHealth<ContinuousClock.Instant>
    let t0 = ContinuousClock.now

    static func outlier(_ failures: Int = 3, percent: Int = 50, on: Set<OutlierConfig.Failure> = Set(OutlierConfig.Failure.allCases)) -> OutlierConfig {
        var outlier = OutlierConfig()
        outlier.consecutiveFailures = failures
        outlier.baseEjectionTime = .seconds(30)
        outlier.interval = .seconds(10)
        outlier.maxEjectionPercent = percent
        outlier.on = on
        return outlier
    }

    @Test func consecutiveFailuresEjectForLongerEachTimeAndTimeForgives() {
        var health = Health(count: 2, outlier: Self.outlier(), healthCheck: nil)
        #expect(health.tryEnded(0, failure: .validator, now: t0) == nil)
        #expect(health.tryEnded(0, failure: .status5xx, now: t0) == nil)
        // A success in between starts the count again.
        #expect(health.tryEnded(0, failure: nil, now: t0) == nil)
        for _ in 0..<2 { #expect(health.tryEnded(0, failure: .reset, now: t0) == nil) }
        #expect(health.tryEnded(0, failure: .timeout, now: t0) == .ejected(0, for: .seconds(30)))
        #expect(!health.isAvailable(0, now: t0 + .seconds(29)))
        var changes: [Health.Change] = []
        #expect(health.candidates(now: t0 + .seconds(31), changes: &changes) == 0b11)
        #expect(changes == [.returned(0)])
        // Ejected again soon after: twice as long.
        for _ in 0..<2 { _ = health.tryEnded(0, failure: .reset, now: t0 + .seconds(32)) }
        #expect(health.tryEnded(0, failure: .reset, now: t0 + .seconds(32)) == .ejected(0, for: .seconds(60)))
        // Back, then in for two intervals: one ejection forgiven per interval.
        _ = health.candidates(now: t0 + .seconds(93), changes: &changes)
        for _ in 0..<2 { _ = health.tryEnded(0, failure: .reset, now: t0 + .seconds(113)) }
        #expect(health.tryEnded(0, failure: .reset, now: t0 + .seconds(113)) == .ejected(0, for: .seconds(30)))
    }

    @Test func onlyTheConfiguredFailuresCountAndAtMostTheirPercentIsOut() {
        var statusOnly = Health(count: 2, outlier: Self.outlier(on: [.connectFailure, .reset, .timeout, .status5xx]), healthCheck: nil)
        for _ in 0..<10 { #expect(statusOnly.tryEnded(1, failure: .validator, now: t0) == nil) }
        #expect(statusOnly.isAvailable(1, now: t0))
        var health = Health(count: 2, outlier: Self.outlier(1, percent: 50), healthCheck: nil)
        #expect(health.tryEnded(0, failure: .reset, now: t0) == .ejected(0, for: .seconds(30)))
        // The second would be 100% out: refused.
        #expect(health.tryEnded(1, failure: .reset, now: t0) == nil)
        #expect(health.isAvailable(1, now: t0))
    }

    @Test func healthChecksNeedTheirThresholdsInARow() {
        var check = HealthCheckConfig()
        check.unhealthyThreshold = 2
        check.healthyThreshold = 3
        var health = Health(count: 2, outlier: nil, healthCheck: check)
        #expect(health.checked(1, passed: false) == nil)
        #expect(health.checked(1, passed: true) == nil)
        #expect(health.checked(1, passed: false) == nil)
        #expect(health.checked(1, passed: false) == .markedDown(1))
        #expect(!health.isAvailable(1, now: t0))
        #expect(health.checked(1, passed: true) == nil)
        #expect(health.checked(1, passed: true) == nil)
        #expect(health.checked(1, passed: true) == .markedUp(1))
    }

    @Test func withEveryEndpointOutCallsGoToAllOfThem() {
        var check = HealthCheckConfig()
        check.unhealthyThreshold = 1
        check.healthyThreshold = 1
        var health = Health(count: 2, outlier: nil, healthCheck: check)
        _ = health.checked(0, passed: false)
        var changes: [Health.Change] = []
        #expect(health.candidates(now: t0, changes: &changes) == 0b10)
        _ = health.checked(1, passed: false)
        #expect(health.candidates(now: t0, changes: &changes) == 0b11)
        #expect(changes == [.panic(true)])
        _ = health.checked(0, passed: true)
        #expect(health.candidates(now: t0, changes: &changes) == 0b01)
        #expect(changes == [.panic(true), .panic(false)])
    }

    @Test func picksFollowTheBalanceAndAvoidTheLastEndpoint() {
        let all: UInt64 = 0b111
        #expect((0..<6).map { EndpointPicker.pick(.roundRobin, candidates: all, exclude: nil, counter: $0, random: 0) { _ in 0 } } == [0, 1, 2, 0, 1, 2])
        // Skips what is not a candidate.
        #expect((0..<4).map { EndpointPicker.pick(.roundRobin, candidates: 0b101, exclude: nil, counter: $0, random: 0) { _ in 0 } } == [0, 2, 0, 2])
        // A retry avoids the last try's endpoint while another may take it.
        #expect(EndpointPicker.pick(.roundRobin, candidates: 0b011, exclude: 0, counter: 0, random: 0) { _ in 0 } == 1)
        #expect(EndpointPicker.pick(.random, candidates: 0b001, exclude: 0, counter: 0, random: 7) { _ in 0 } == 0)
        // Power of two choices: of the two drawn, the less busy one.
        let inFlight = [5, 1, 9]
        #expect(EndpointPicker.pick(.leastRequest, candidates: all, exclude: nil, counter: 0, random: 2 | (1 << 32)) { inFlight[$0] } == 1)
        #expect(EndpointPicker.pick(.leastRequest, candidates: all, exclude: nil, counter: 0, random: 0 | (2 << 32)) { inFlight[$0] } == 0)
    }

    @Test func explainNamesTheEndpointAFirstCallGoesTo() throws {
        let config = try ConfigLoader.load(yaml: """
            listeners: [{address: 127.0.0.1:0}]
            upstreams: {app: {endpoints: ["http://127.0.0.1:9001", "http://127.0.0.1:9002"]}}
            routes: [{name: app, upstream: app}]
            """).config
        let outcome = Explanation.explain(method: "GET", target: "/x", headers: [:], body: [], config: config,
                                          client: ClientInfo(address: "127.0.0.1", scheme: "http", requestID: "r"))
        guard case .forwarded(_, _, _, let description, let request, _) = outcome else { Issue.record("not forwarded"); return }
        #expect(description == "http://127.0.0.1:9001: endpoint 1 of 2 by round_robin")
        // Host is the first endpoint's, whichever endpoint the call goes to.
        #expect(String(decoding: request, as: UTF8.self).contains("Host: 127.0.0.1:9001\r\n"))
    }
}
