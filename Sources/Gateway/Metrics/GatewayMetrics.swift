import CoreMetrics
import NIOCore
import Synchronization

/// The gateway's metrics, through swift-metrics (Prometheus names: the
/// admin endpoint serves them). Handles are made once and cached, so a call
/// pays a counter increment, not a factory lookup.
public final class GatewayMetrics: Sendable {
    let factory: any MetricsFactory
    let connections: Meter
    let streams: Meter
    private let reloads: Mutex<[String: Counter]> = Mutex([:])
    /// Calls no route matched.
    let unrouted: RouteMetrics

    /// The gateway's meters, counters and histograms, made by `factory` (Prometheus in `gatewayd`).
    public init(factory: any MetricsFactory) {
        self.factory = factory
        connections = Meter(label: "gatewayd_active_connections", factory: factory)
        streams = Meter(label: "gatewayd_active_streams", factory: factory)
        unrouted = RouteMetrics(route: "-", upstream: nil, factory: factory)
        Gauge(label: "gatewayd_build_info", dimensions: [("version", GatewayVersion.current)], factory: factory).record(1)
    }

    /// A reload: `result` is `ok` or `failed`.
    public func reloaded(_ result: String) {
        reloads.withLock { counters in
            if counters[result] == nil {
                counters[result] = Counter(label: "gatewayd_config_reloads_total", dimensions: [("result", result)], factory: factory)
            }
            return counters[result]!
        }.increment()
    }
}

/// One route's counters and histograms.
final class RouteMetrics: Sendable {
    private let route: String
    private let factory: any MetricsFactory
    /// Nil for calls no route matched: they try no upstream.
    let tries: Counter?
    private let duration: Timer
    /// By method and status class (`2xx`), made on first use. The common
    /// methods' counters sit in fixed slots, read with one atomic load (not
    /// `AtomicLazyReference`, whose `load` is not inlinable: its generic
    /// metadata looked up per call costs ~300 instructions); other methods
    /// and classes go to `otherCalls`.
    private let calls: InlineArray<35, Atomic<Unmanaged<Counter>?>> = InlineArray { _ in Atomic(nil) }
    private let otherCalls: Mutex<[CallKey: Counter]> = Mutex([:])
    /// Retries by reason, validator outcomes, refreshes by result.
    private let events: Mutex<[EventKey: Counter]> = Mutex([:])

    private struct CallKey: Hashable {
        var method: String
        var statusClass: Int
    }

    private struct EventKey: Hashable {
        var label: String
        var dimensions: [String]
    }

    /// By `CacheResult`, made with the route when it has a cache (else none).
    private let cacheLookups: [Counter]

    init(route: String, upstream: String?, factory: any MetricsFactory, caches: Bool = false) {
        self.route = route
        self.factory = factory
        cacheLookups = caches ? CacheResult.allCases.map {
            Counter(label: "gatewayd_cache_lookups_total", dimensions: [("route", route), ("result", $0.name)], factory: factory)
        } : []
        tries = upstream.map {
            Counter(label: "gatewayd_upstream_tries_total", dimensions: [("route", route), ("upstream", $0)], factory: factory)
        }
        duration = Timer(label: "gatewayd_request_duration_seconds", dimensions: [("route", route)], factory: factory)
    }

    func callEnded(method: String, status: Int, started: NIODeadline, now: NIODeadline) {
        duration.recordNanoseconds((now - started).nanoseconds)
        let statusClass = status / 100
        guard let methodSlot = Self.slot(method), (1...5).contains(statusClass) else {
            let key = CallKey(method: method, statusClass: statusClass)
            return otherCalls.withLock { counters in
                if let counter = counters[key] { return counter }
                let counter = callCounter(method: method, statusClass: statusClass)
                counters[key] = counter
                return counter
            }.increment()
        }
        let slot = methodSlot * 5 + statusClass - 1
        if let counter = calls[slot].load(ordering: .acquiring) { return counter.takeUnretainedValue().increment() }
        let made = Unmanaged.passRetained(callCounter(method: Self.slotted[methodSlot], statusClass: statusClass))
        let (stored, first) = calls[slot].compareExchange(expected: nil, desired: made, ordering: .acquiringAndReleasing)
        if stored { return made.takeUnretainedValue().increment() }
        // Another loop made it first: its counter is the one.
        made.release()
        guard let first else { return }
        first.takeUnretainedValue().increment()
    }

    deinit {
        for slot in calls.indices { calls[slot].load(ordering: .acquiring)?.release() }
    }

    /// The methods with slots, in slot order.
    private static let slotted = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]

    private static func slot(_ method: String) -> Int? { slotted.firstIndex(of: method) }

    private func callCounter(method: String, statusClass: Int) -> Counter {
        Counter(label: "gatewayd_requests_total", dimensions: [("route", route), ("method", method), ("status_class", "\(statusClass)xx")],
                factory: factory)
    }

    func retried(reason: String) { event("gatewayd_retries_total", [("reason", reason)]) }

    func validator(_ label: String, action: String) {
        event("gatewayd_validator_outcomes_total", [("validator", label), ("action", action)])
    }

    func refresh(_ start: CredentialRefresher.Start) {
        let result = switch start {
        case .ready: "reused"
        case .wait: "waited"
        case .throttled: "throttled"
        }
        event("gatewayd_refreshes_total", [("result", result)])
    }

    /// What the route's cache did for a call (the access line's `cache=`): a counter of its own, no lookup.
    func cache(_ result: CacheResult) { cacheLookups[result.rawValue].increment() }

    func refreshFinished(ok: Bool) { event("gatewayd_refresh_calls_total", [("result", ok ? "ok" : "failed")]) }

    private func event(_ label: String, _ dimensions: [(String, String)]) {
        let key = EventKey(label: label, dimensions: dimensions.map(\.1))
        events.withLock { counters in
            if let counter = counters[key] { return counter }
            let counter = Counter(label: label, dimensions: [("route", route)] + dimensions, factory: factory)
            counters[key] = counter
            return counter
        }.increment()
    }
}

/// What a route's cache did for one call, as the access line and the metrics name it.
enum CacheResult: Int, CaseIterable, Sendable {
    case hit, miss, stale, revalidated, collapsed

    var name: String {
        switch self {
        case .hit: "hit"
        case .miss: "miss"
        case .stale: "stale"
        case .revalidated: "revalidated"
        case .collapsed: "collapsed"
        }
    }
}
