import CoreMetrics
import Logging
import NIOCore
import Rewriter
import Synchronization

/// One endpoint of an upstream at run time: where it is and what it carries now.
final class Endpoint: Sendable {
    let url: UpstreamURL
    let index: Int
    unowned let upstream: UpstreamState
    /// Tries on it now (least_request reads it; `/upstreams` shows it).
    let inFlight = Atomic(0)
    let requests: Counter
    let healthy: Gauge
    let ejections: Counter
    /// What a span of a try on it says of it.
    let spanAttributes: [UInt8]

    init(url: UpstreamURL, index: Int, upstream: UpstreamState, factory: any MetricsFactory) {
        self.url = url
        self.index = index
        self.upstream = upstream
        spanAttributes = OTLPTraces.endpointAttributes(upstream: upstream.name, host: url.host, port: url.port)
        let labels = [("upstream", upstream.name), ("endpoint", url.description)]
        requests = Counter(label: "gatewayd_endpoint_requests_total", dimensions: labels, factory: factory)
        healthy = Gauge(label: "gatewayd_endpoint_healthy", dimensions: labels, factory: factory)
        ejections = Counter(label: "gatewayd_endpoint_ejections_total", dimensions: labels, factory: factory)
        healthy.record(1)
    }

    /// A try starts on it / ends.
    func tryStarted() {
        inFlight.add(1, ordering: .relaxed)
        upstream.inFlight.add(1, ordering: .relaxed)
        requests.increment()
    }

    func tryFinished() {
        inFlight.subtract(1, ordering: .relaxed)
        upstream.inFlight.subtract(1, ordering: .relaxed)
    }
}

/// An upstream's endpoints and their health, shared by every event loop:
/// which endpoint a call goes to, what the health checks and the calls'
/// outcomes say about each, and the circuit breakers' counts. Each change
/// of state is one log line.
final class UpstreamState: Sendable {
    let name: String
    let config: UpstreamConfig
    private(set) nonisolated(unsafe) var endpoints: [Endpoint] = []
    private let health: Mutex<EndpointHealth<LoopInstant>>
    /// Whether anything can make an endpoint unavailable (else every pick skips the lock).
    private let watched: Bool
    private let counter = Atomic(0)
    /// Tries in flight and calls waiting for a connection, over all event loops.
    let inFlight = Atomic(0)
    let pending = Atomic(0)
    private let logger: Logger

    init(config: UpstreamConfig, kept: [UpstreamURL: EndpointHealth<LoopInstant>.Record], logger: Logger, factory: any MetricsFactory) {
        name = config.name
        self.config = config
        self.logger = logger
        watched = config.endpoints.count > 1 && (config.healthCheck != nil || config.outlier != nil)
        var carried: [Int: EndpointHealth<LoopInstant>.Record] = [:]
        for (index, url) in config.endpoints.enumerated() { carried[index] = kept[url] }
        health = Mutex(EndpointHealth(count: config.endpoints.count, outlier: config.outlier, healthCheck: config.healthCheck, kept: carried))
        endpoints = config.endpoints.enumerated().map { Endpoint(url: $1, index: $0, upstream: self, factory: factory) }
        for (index, endpoint) in endpoints.enumerated() where !(carried[index]?.healthy ?? true) { endpoint.healthy.record(0) }
    }

    /// The endpoint a try goes to; `exclude`: the one the call's last try
    /// went to, avoided when another may take it; `random`: a fresh random number.
    func pick(exclude: Int?, random: UInt64) -> Endpoint {
        guard endpoints.count > 1 else { return endpoints[0] }
        var changes: [EndpointHealth<LoopInstant>.Change] = []
        let candidates = watched ? health.withLock { $0.candidates(now: .now, changes: &changes) } : EndpointPicker.all(endpoints.count)
        report(changes)
        let index = EndpointPicker.pick(config.balance, candidates: candidates, exclude: exclude,
                                        counter: counter.wrappingAdd(1, ordering: .relaxed).oldValue, random: random) {
            endpoints[$0].inFlight.load(ordering: .relaxed)
        }
        return endpoints[index]
    }

    /// The circuit breaker a new try trips, said as the 503's detail (nil:
    /// none); `waiting`: the try would wait for a connection.
    func breakerOpen(waiting: Bool) -> String? {
        if waiting {
            guard let limit = config.maxPending, pending.load(ordering: .relaxed) >= limit else { return nil }
            return "max_pending (\(limit) waiting for a connection)"
        }
        guard let limit = config.maxRequests, inFlight.load(ordering: .relaxed) >= limit else { return nil }
        return "max_requests (\(limit) in flight)"
    }

    /// A try on `endpoint` ended; `failure`: what made it fail, nil when it did not.
    func tryEnded(_ endpoint: Endpoint, failure: OutlierConfig.Failure?) {
        guard config.outlier != nil else { return }
        let change = health.withLock { $0.tryEnded(endpoint.index, failure: failure, now: .now) }
        if let change { report([change]) }
    }

    /// A health check of `endpoint` passed or failed (`reason`: why, for the log).
    func checked(_ endpoint: Endpoint, passed: Bool, reason: String) {
        let change = health.withLock { $0.checked(endpoint.index, passed: passed) }
        if let change { report([change], reason: reason) }
    }

    /// Each endpoint's record, to carry into the state a reload makes.
    var records: [UpstreamURL: EndpointHealth<LoopInstant>.Record] {
        let records = health.withLock { $0.endpoints }
        return Dictionary(uniqueKeysWithValues: zip(config.endpoints, records))
    }

    /// What `GET /upstreams` shows of it.
    func snapshot() -> JSONValue {
        let now = LoopInstant.now
        let (records, panicking) = health.withLock { ($0.endpoints, $0.panicking) }
        let endpoints: [JSONValue] = zip(self.endpoints, records).map { endpoint, record in
            var members: [JSONObject.Member] = [
                .init(key: "url", value: .string(endpoint.url.description)), .init(key: "healthy", value: .bool(record.healthy)),
                .init(key: "ejected", value: .bool(record.ejectedUntil.map { now < $0 } ?? false)),
                .init(key: "in_flight", value: .number(String(endpoint.inFlight.load(ordering: .relaxed)))),
                .init(key: "ejections", value: .number(String(record.totalEjections))),
                .init(key: "consecutive_failures", value: .number(String(record.consecutiveFailures))),
            ]
            if let until = record.ejectedUntil, now < until {
                members.append(.init(key: "ejected_for_ms", value: .number(String(Int(now.duration(to: until) / .milliseconds(1))))))
            }
            return .object(JSONObject(members))
        }
        return .object(JSONObject([
            "name": .string(name), "balance": .string(config.balance.rawValue),
            "in_flight": .number(String(inFlight.load(ordering: .relaxed))), "pending": .number(String(pending.load(ordering: .relaxed))),
            "panic": .bool(panicking), "endpoints": .array(endpoints),
        ]))
    }

    private func report(_ changes: [EndpointHealth<LoopInstant>.Change], reason: String? = nil) {
        for change in changes {
            let because = reason.map { ": \($0)" } ?? ""
            switch change {
            case .markedDown(let i):
                endpoints[i].healthy.record(0)
                logger.warning("upstream \(name): endpoint \(endpoints[i].url) marked down by its health check\(because)")
            case .markedUp(let i):
                endpoints[i].healthy.record(1)
                logger.notice("upstream \(name): endpoint \(endpoints[i].url) marked up by its health check")
            case .ejected(let i, let time):
                endpoints[i].ejections.increment()
                logger.warning("upstream \(name): endpoint \(endpoints[i].url) ejected for \(time) after \(config.outlier?.consecutiveFailures ?? 0) failed tries in a row")
            case .returned(let i):
                logger.notice("upstream \(name): endpoint \(endpoints[i].url) back from ejection")
            case .panic(true):
                logger.error("upstream \(name): every endpoint is down or ejected; calls go to all of them (panic mode)")
            case .panic(false):
                logger.notice("upstream \(name): an endpoint is available again; panic mode over")
            }
        }
    }
}

/// Endpoint health by upstream, across reloads: an endpoint that stays
/// (same upstream, same URL) keeps its health and ejection.
final class UpstreamStateRegistry: Sendable {
    private let states = Mutex<[String: UpstreamState]>([:])

    func states(for upstreams: [UpstreamConfig], logger: Logger, factory: any MetricsFactory) -> [String: UpstreamState] {
        states.withLock { states in
            var made: [String: UpstreamState] = [:]
            for upstream in upstreams {
                made[upstream.name] = UpstreamState(config: upstream, kept: states[upstream.name]?.records ?? [:], logger: logger, factory: factory)
            }
            states = made
            return made
        }
    }
}
