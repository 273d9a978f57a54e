import CoreMetrics
import NIOCore
import Rewriter
import Synchronization

/// One key's tokens, as a value: refilled continuously at `rate` up to
/// `capacity`, one taken per call. Kept as the one instant at which it is
/// full again (GCRA's form of the same bucket): 8 bytes a key. No clock of
/// its own (times in seconds are passed in), so it is tested without waiting.
struct TokenBucket: Sendable {
    private var full: Double

    init(capacity: Double, now: Double) { full = now }

    /// Takes a token if there is one; else how long until there is (seconds).
    mutating func take(now: Double, rate: Double, capacity: Double) -> Double? {
        let tokens = capacity - max(0, full - now) * rate
        guard tokens < 1 else {
            full = max(full, now) + 1 / rate
            return nil
        }
        return (1 - tokens) / rate
    }

    /// Full again by `now`: forgetting it changes nothing.
    func isIdle(now: Double, rate: Double, capacity: Double) -> Bool { full <= now }
}

/// A route's `rate_limit`: the buckets of its keys, shared by every event
/// loop, at most `maxKeys` of them (when full, keys whose buckets refilled
/// are forgotten first, then any). A key is kept as its 64-bit hash under
/// this process's random seed (SipHash, Swift's `Hasher`), never its bytes:
/// memory is bounded by `maxKeys` alone however long the keys clients send,
/// and clients cannot aim collisions at a seed they do not know.
///
/// With `scope: fleet` and a store, the fleet's buckets decide; these are
/// the fallback while the store is down (`on_store_failure: local`).
final class RateLimiter: Sendable {
    let config: RateLimitConfig
    let fleet: FleetRateLimit?
    private let buckets = Mutex<[Int: TokenBucket]>([:])
    private let allowed: Counter
    private let limited: Counter
    private let storeDown: Counter

    init(config: RateLimitConfig, route: String, factory: any MetricsFactory, store: RedisClient?) {
        self.config = config
        fleet = config.scope == .fleet ? store.map { FleetRateLimit(config: config, route: route, store: $0) } : nil
        storeDown = Counter(label: "gatewayd_rate_limit_store_down_total", dimensions: [("route", route)], factory: factory)
        allowed = Counter(label: "gatewayd_rate_limit_total", dimensions: [("route", route), ("outcome", "allowed")], factory: factory)
        limited = Counter(label: "gatewayd_rate_limit_total", dimensions: [("route", route), ("outcome", "limited")], factory: factory)
    }

    enum Verdict {
        case allowed
        /// Refused: it may come back in this many seconds.
        case refused(wait: Double)
        /// The fleet's lease is spent and its refill out: decided once that has its answer (`verdict(after:on:)`).
        case waits(Pending)
    }

    /// A call waiting for a fleet refill's answer.
    struct Pending {
        let limiter: RateLimiter
        let key: String
        let refill: UInt64

        /// nil when the call goes ahead, else the seconds until it may.
        func verdict(on eventLoop: any EventLoop) -> EventLoopFuture<Double?> {
            guard let fleet = limiter.fleet else { return eventLoop.makeSucceededFuture(nil) }
            return fleet.wait(for: refill, on: eventLoop).map { [limiter, key] in
                switch limiter.check(key, now: Double(NIODeadline.now().uptimeNanoseconds) / 1e9, mayWait: false) {
                case .allowed: nil
                case .refused(let wait): wait
                case .waits: Double(limiter.config.leaseSize) / limiter.config.rate  // not given once waited
                }
            }
        }
    }

    /// What a call with `key` at `now` (seconds, monotonic) may do.
    /// `mayWait: false`: never `.waits` (the call has waited once).
    func check(_ key: String, now: Double, mayWait: Bool = true) -> Verdict {
        let verdict = decide(key, now: now, mayWait: mayWait)
        switch verdict {
        case .allowed: allowed.increment()
        case .refused: limited.increment()
        case .waits: break
        }
        return verdict
    }

    private func decide(_ key: String, now: Double, mayWait: Bool) -> Verdict {
        if let fleet {
            if fleet.store.isAvailable {
                switch fleet.check(key, now: now, mayWait: mayWait) {
                case .allowed: return .allowed
                case .refused(let wait): return .refused(wait: wait)
                case .waits(let refill): return .waits(Pending(limiter: self, key: key, refill: refill))
                case .unanswered: break
                }
            }
            storeDown.increment()
            if config.onStoreFailure == .deny { return .refused(wait: 1) }
        }
        let (rate, capacity) = (config.rate, config.capacity)
        let key = key.hashValue
        let maxKeys = config.maxKeys
        let wait = buckets.withLock { buckets -> Double? in
            if buckets[key] == nil { buckets.makeRoom(maxKeys: maxKeys) { $0.isIdle(now: now, rate: rate, capacity: capacity) } }
            return buckets[key, default: TokenBucket(capacity: capacity, now: now)].take(now: now, rate: rate, capacity: capacity)
        }
        return wait.map { .refused(wait: $0) } ?? .allowed
    }

    var trackedKeys: Int { buckets.withLock { $0.count } }

    /// The key a call is counted under.
    func key(_ headers: HeaderList, client: String) -> String {
        switch config.key {
        case .clientIP: client
        case .header(let name): headers[name] ?? ""
        }
    }

    /// The IETF httpapi draft's fields for a refused call that may retry
    /// after `wait` seconds, with Retry-After (RFC 9110) for older clients.
    func refusalHeaders(policy: String, wait: Double) -> HeaderList {
        let seconds = String(max(1, Int(wait.rounded(.up))))
        let window = String(max(1, Int(config.per.seconds.rounded(.up))))
        return ["Retry-After": seconds, "RateLimit-Policy": "\"\(policy)\";q=\(config.requests);w=\(window)",
                "RateLimit": "\"\(policy)\";r=0;t=\(seconds)"]
    }
}

extension Dictionary where Key == Int {
    /// Room for one more key in a map kept to `maxKeys`: idle entries go
    /// first; when every key is busy, a tenth go (their next calls start anew).
    mutating func makeRoom(maxKeys: Int, isIdle: (Value) -> Bool) {
        guard count >= maxKeys else { return }
        self = filter { !isIdle($0.value) }
        if count >= maxKeys {
            for key in Array(keys.prefix(Swift.max(1, maxKeys / 10))) { self[key] = nil }
        }
    }
}
