import NIOCore
import Synchronization

/// A route's `rate_limit` with `scope: fleet`: one token bucket per key in
/// the store, shared by every gatewayd using it, spent through this
/// process's leases (`FleetLease`). Keys are held here as their hash, like
/// the local limiter's, at most `max_keys`; in the store as
/// `<key_prefix>rate:<route>:<key>`, expiring once full again.
final class FleetRateLimit: Sendable {
    let store: RedisClient
    private let config: RateLimitConfig
    private let prefix: String
    private let state = Mutex(Leases())

    private struct Leases {
        var byKey: [Int: FleetLease] = [:]
        var nextID: UInt64 = 0
        /// The refills out, by id, with the calls waiting for their answers.
        var waiting: [UInt64: [EventLoopPromise<Void>]] = [:]
    }

    /// The bucket as GCRA keeps it: the instant (server time, seconds) it is
    /// full again. Charges the credit first (past empty if need be), then
    /// leases what is there of the tokens wanted. Returns {leased, ms until
    /// the next token when short}.
    static let script = RedisScript("""
        local t = redis.call('TIME')
        local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
        local rate, capacity = tonumber(ARGV[1]), tonumber(ARGV[2])
        local charged, wanted = tonumber(ARGV[3]), tonumber(ARGV[4])
        local full = math.max(tonumber(redis.call('GET', KEYS[1]) or 0), now) + charged / rate
        local got = math.max(0, math.min(wanted, math.floor(capacity - (full - now) * rate + 1e-9)))
        full = full + got / rate
        redis.call('SET', KEYS[1], string.format('%.6f', full), 'PX', math.ceil((full - now) * 1000) + 1000)
        local wait = 0
        if got < wanted then wait = math.max(0, (full - now) - (capacity - 1) / rate) end
        return {got, math.ceil(wait * 1000)}
        """)

    init(config: RateLimitConfig, route: String, store: RedisClient) {
        self.config = config
        self.store = store
        prefix = store.config.keyPrefix + "rate:" + route + ":"
    }

    enum Verdict: Equatable {
        case allowed
        /// The next token is this many seconds away.
        case refused(wait: Double)
        /// The store is not answering: `on_store_failure` decides.
        case unanswered
        /// Decided again (`mayWait: false`) once the refill `refill` has its answer (`wait(for:on:)`).
        case waits(refill: UInt64)
    }

    func check(_ key: String, now: Double, mayWait: Bool = true) -> Verdict {
        let (size, rate, maxKeys) = (config.leaseSize, config.rate, config.maxKeys)
        let hash = key.hashValue
        let decision = state.withLock { state in
            if state.byKey[hash] == nil { state.byKey.makeRoom(maxKeys: maxKeys) { $0.isIdle(now: now, size: size, rate: rate) } }
            state.nextID &+= 1
            let decision = state.byKey[hash, default: FleetLease(now: now)].take(now: now, size: size, rate: rate, nextID: state.nextID,
                                                                                 mayWait: mayWait)
            if let refill = decision.refill { state.waiting[refill.id] = [] }
            return decision
        }
        let verdict: Verdict = switch decision {
        case .allowed: .allowed
        case .refused(let wait, _): .refused(wait: wait)
        case .unanswered: .unanswered
        case .waits(let out, _): .waits(refill: out)
        }
        if let refill = decision.refill { send(refill, key: key, hash: hash) }
        return verdict
    }

    /// Succeeds on `eventLoop` once the refill `id` has its answer (at once if it has).
    func wait(for id: UInt64, on eventLoop: any EventLoop) -> EventLoopFuture<Void> {
        let promise = eventLoop.makePromise(of: Void.self)
        let out = state.withLock { state in
            guard state.waiting[id] != nil else { return false }
            state.waiting[id]?.append(promise)
            return true
        }
        if !out { promise.succeed() }
        return promise.futureResult
    }

    /// The script's reply, `{tokens leased, milliseconds to the next}`, read
    /// as bounded counts (the store is untrusted input); nil for any other shape.
    static func grant(from reply: RedisValue) -> (got: Int, wait: Double)? {
        guard case .array(let values) = reply, values.count == 2, let got = values[0].count, let waitMs = values[1].count else { return nil }
        return (got, Double(waitMs) / 1000)
    }

    private func send(_ refill: FleetLease.Refill, key: String, hash: Int) {
        let arguments = [String(config.rate), String(config.capacity), String(refill.charged), String(refill.wanted)]
        Self.script.run(on: store, keys: [prefix + key], arguments: arguments).whenComplete { result in
            let now = Double(NIODeadline.now().uptimeNanoseconds) / 1e9
            let waiting = self.state.withLock { state in
                if case .success(let reply) = result, let (got, wait) = Self.grant(from: reply) {
                    state.byKey[hash]?.granted(refill, got: got, wait: wait, now: now)
                } else {
                    state.byKey[hash]?.failed(refill)
                }
                return state.waiting.removeValue(forKey: refill.id) ?? []
            }
            for call in waiting { call.succeed() }
        }
    }
}
