import CoreMetrics
import Logging
import Synchronization

/// What a filter's VM reaches outside itself. In the daemon: the event
/// loop's upstream pool for HTTP calls and its scheduler for ticks; offline
/// (`check`, `explain`): neither, and a filter's HTTP call is refused.
struct FilterServices {
    let logger: Logger
    let shared: FilterSharedState
    /// Sends a filter's HTTP call to the named upstream and reports its answer
    /// (false: there is no such upstream, or calls are not made here).
    var httpCall: ((FilterHTTPCall, @escaping (Result<OwnCall.Contents, any Error>) -> Void) -> Bool)?
    /// Calls `tick` every `period` until the VM is gone.
    var scheduleTick: ((FilterVM, Duration) -> Void)?
    /// Whether calls are real (the daemon) or described (`explain`).
    var offline: Bool { httpCall == nil }
}

/// An HTTP call a filter makes (`proxy_http_call`).
struct FilterHTTPCall {
    var upstream: String
    var headers: FilterExchange.Fields
    var body: [UInt8]
    var timeout: Duration
}

/// What every VM of the process shares: shared data (with its
/// compare-and-set), shared queues, and the filters' metrics.
final class FilterSharedState: Sendable {
    private struct Entry {
        var value: [UInt8]
        var cas: UInt32
    }

    private struct Metric {
        let type: ProxyWasm.MetricType
        var value: Int64
        let counter: Counter?
        let gauge: Gauge?
        let recorder: Recorder?
    }

    private let data = Mutex<[String: Entry]>([:])
    private let queues = Mutex<(byName: [String: UInt32], items: [UInt32: [[UInt8]]])>(([:], [:]))
    private let metrics = Mutex<(byName: [String: UInt32], all: [Metric])>(([:], []))
    let factory: any MetricsFactory

    init(factory: any MetricsFactory) { self.factory = factory }

    func get(_ key: String) -> (value: [UInt8], cas: UInt32)? {
        data.withLock { $0[key].map { ($0.value, $0.cas) } }
    }

    /// `cas` 0 sets unconditionally; otherwise it must be the value's current one.
    func set(_ key: String, _ value: [UInt8], cas: UInt32) -> ProxyWasm.Status {
        data.withLock { entries in
            let current = entries[key]?.cas ?? 0
            if cas != 0, cas != current { return .casMismatch }
            entries[key] = Entry(value: value, cas: current &+ 1 == 0 ? 1 : current &+ 1)
            return .ok
        }
    }

    func registerQueue(_ name: String) -> UInt32 {
        queues.withLock { queues in
            if let id = queues.byName[name] { return id }
            let id = UInt32(queues.byName.count + 1)
            queues.byName[name] = id
            queues.items[id] = []
            return id
        }
    }

    func resolveQueue(_ name: String) -> UInt32? { queues.withLock { $0.byName[name] } }

    func enqueue(_ id: UInt32, _ value: [UInt8]) -> ProxyWasm.Status {
        queues.withLock { queues in
            guard queues.items[id] != nil else { return .notFound }
            queues.items[id]!.append(value)
            return .ok
        }
    }

    /// The oldest value of queue `id`, or why there is none.
    func dequeue(_ id: UInt32) -> ([UInt8]?, ProxyWasm.Status) {
        queues.withLock { queues in
            guard let items = queues.items[id] else { return (nil, .notFound) }
            guard let first = items.first else { return (nil, .empty) }
            queues.items[id]!.removeFirst()
            return (first, .ok)
        }
    }

    /// A filter's metric, on /metrics as `gatewayd_filter_<name>{filter="..."}`:
    /// the same name from every VM of the filter is one metric.
    func defineMetric(_ type: ProxyWasm.MetricType, name: String, filter: String) -> UInt32 {
        let sanitized = String(name.map { $0.isLetter || $0.isNumber || $0 == "_" ? $0 : "_" })
        let label = "gatewayd_filter_\(sanitized)"
        let key = "\(filter)\u{0}\(label)"
        return metrics.withLock { metrics in
            if let id = metrics.byName[key] { return id }
            let dimensions = [("filter", filter)]
            let metric = Metric(
                type: type, value: 0,
                counter: type == .counter ? Counter(label: label, dimensions: dimensions, factory: factory) : nil,
                gauge: type == .gauge ? Gauge(label: label, dimensions: dimensions, factory: factory) : nil,
                recorder: type == .histogram ? Recorder(label: label, dimensions: dimensions, aggregate: true, factory: factory) : nil)
            metrics.all.append(metric)
            let id = UInt32(metrics.all.count)
            metrics.byName[key] = id
            return id
        }
    }

    /// Adds `delta` (a counter only grows) or records `value`.
    func recordMetric(_ id: UInt32, delta: Int64? = nil, value: Int64? = nil) -> ProxyWasm.Status {
        metrics.withLock { metrics in
            let index = Int(id) - 1
            guard metrics.all.indices.contains(index) else { return .notFound }
            var metric = metrics.all[index]
            switch metric.type {
            case .counter:
                let add = delta ?? ((value ?? 0) - metric.value)
                guard add >= 0 else { return .badArgument }
                metric.value += add
                metric.counter?.increment(by: add)
            case .gauge:
                metric.value = value ?? metric.value + (delta ?? 0)
                metric.gauge?.record(metric.value)
            case .histogram:
                guard let value else { return .badArgument }
                metric.value = value
                metric.recorder?.record(value)
            }
            metrics.all[index] = metric
            return .ok
        }
    }

    func metricValue(_ id: UInt32) -> Int64? {
        metrics.withLock { metrics in
            let index = Int(id) - 1
            return metrics.all.indices.contains(index) ? metrics.all[index].value : nil
        }
    }
}
