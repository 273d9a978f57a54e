import CoreMetrics
import NIOCore
import Rewriter
import Synchronization

/// The answers every route's `cache` keeps, in one memory bound
/// (`cache.max_bytes`, least recently used evicted first, over all routes),
/// shared by every event loop, and the fills under way: a miss for a key
/// whose fill is under way waits for it (nginx `proxy_cache_lock`) instead
/// of going upstream too. Kept across reloads (`RouteStateRegistry`).
final class ResponseCache: Sendable {
    /// What tells stored answers apart: the route, the path (with the query
    /// unless the route's key leaves it out), and the key's request fields.
    /// GET and HEAD share an entry. Its `Vary` variants are kept under it.
    struct Key: Hashable, Sendable {
        var route: String
        var target: String
        var fields: [String]
    }

    /// A waiter's turn: the fill it waited for ended so.
    enum FillEnd: Sendable {
        /// Stored, or served stale by the leader after a failure (`fwdStatus`: what the upstream gave).
        case answer(StoredAnswer, stale: Bool, fwdStatus: Int?)
        /// The leader's call failed with the gateway's `problem`, nothing stale to serve: the waiter gets it too.
        case failed(Problem)
        /// Nothing storable (or the leader's client left): the waiter goes upstream itself.
        case released
    }

    typealias Waiter = @Sendable (FillEnd) -> Void

    /// The one call filling a key; ended exactly once (`ResponseCache.end`).
    final class Fill: Sendable {
        let key: Key
        /// The stale answer it revalidates, and serves when the upstream fails.
        let stale: StoredAnswer?
        fileprivate init(key: Key, stale: StoredAnswer?) {
            self.key = key
            self.stale = stale
        }
    }

    enum Lookup {
        case fresh(StoredAnswer)
        /// Served now; `refresh`: this call starts the one background refresh (nil: one runs).
        case staleWhileRevalidating(StoredAnswer, refresh: Fill?)
        /// This call goes upstream and fills the key.
        case fill(Fill)
        /// Nothing usable and this call does not fill (a HEAD): it goes upstream alone.
        case pass
        /// Another call is filling it: `id` names the wait (to cancel it).
        case wait(id: UInt64)
    }

    private struct Storage: Sendable {
        var answers: ByteLRU<Key, [StoredAnswer]>
        var fills: [Key: (fill: Fill, waiters: [(id: UInt64, turn: Waiter)])] = [:]
        var nextWaiter: UInt64 = 0
        var maxEntryBytes: Int
    }

    /// Variants of one key kept at most (by `Vary`); the oldest goes first.
    static let maxVariants = 8

    private let storage: Mutex<Storage>
    private let storedBytes: Gauge
    private let evictions: Counter

    init(_ config: CacheConfig, factory: any MetricsFactory = NOOPMetricsHandler.instance) {
        storage = Mutex(Storage(answers: ByteLRU(limit: config.maxBytes), maxEntryBytes: config.maxEntryBytes))
        storedBytes = Gauge(label: "gatewayd_cache_stored_bytes", factory: factory)
        evictions = Counter(label: "gatewayd_cache_evictions_total", factory: factory)
    }

    /// A new config's bounds: entries past the new `max_bytes` are evicted.
    func resize(_ config: CacheConfig) {
        let (evicted, bytes) = storage.withLock {
            $0.maxEntryBytes = config.maxEntryBytes
            return ($0.answers.shrink(to: config.maxBytes), $0.answers.bytes)
        }
        if evicted > 0 { evictions.increment(by: evicted) }
        storedBytes.record(bytes)
    }

    var maxEntryBytes: Int { storage.withLock { $0.maxEntryBytes } }
    var bytes: Int { storage.withLock { $0.answers.bytes } }

    /// What a GET or HEAD for `key` gets at `now`. A miss (or an entry that
    /// must be revalidated) fills the key, or waits for the fill under way
    /// when `coalesce`; `waiter` is called once, on whatever thread ends the fill.
    /// A HEAD does not `fill` (its answer has no body to store). `waiter`
    /// is made only for a call that waits (a hit allocates no closure).
    func lookup(_ key: Key, request: HeaderList, now: Int64, requestNoCache: Bool, fills: Bool, coalesce: Bool, waiter: () -> Waiter) -> Lookup {
        storage.withLock { storage in
            let stored = storage.answers.use(key)?.first { $0.matches(request) }
            if let stored {
                switch stored.use(now: now, requestNoCache: requestNoCache) {
                case .fresh:
                    return .fresh(stored)
                case .staleWhileRevalidating:
                    guard fills, storage.fills[key] == nil else { return .staleWhileRevalidating(stored, refresh: nil) }
                    let fill = Fill(key: key, stale: stored)
                    storage.fills[key] = (fill, [])
                    return .staleWhileRevalidating(stored, refresh: fill)
                case .stale:
                    break
                }
            }
            guard fills else { return .pass }
            if coalesce, storage.fills[key] != nil {
                storage.nextWaiter += 1
                storage.fills[key]!.waiters.append((storage.nextWaiter, waiter()))
                return .wait(id: storage.nextWaiter)
            }
            let fill = Fill(key: key, stale: stored)
            // Without coalescing, the latest miss owns the key's fill; an earlier one's end is then ignored.
            storage.fills[key] = (fill, storage.fills[key]?.waiters ?? [])
            return .fill(fill)
        }
    }

    /// A waiter whose call ended (its client left, its deadline passed) is forgotten.
    func cancel(wait id: UInt64, key: Key) {
        storage.withLock { $0.fills[key]?.waiters.removeAll { $0.id == id } }
    }

    /// The fill is over: `answer` stored (nil: nothing storable), its
    /// waiters given `end` (computed from what was stored when nil).
    func end(_ fill: Fill, storing answer: StoredAnswer?, waiters end: FillEnd? = nil) {
        let (waiters, evicted, bytes) = storage.withLock { storage -> ([(id: UInt64, turn: Waiter)], Int, Int) in
            var evicted = 0
            if let answer, answer.bytes <= storage.maxEntryBytes {
                var variants = storage.answers.remove(fill.key) ?? []
                variants.removeAll { old in zip(old.vary, answer.vary).allSatisfy { $0.value == $1.value } && old.vary.count == answer.vary.count }
                variants.insert(answer, at: 0)
                if variants.count > Self.maxVariants { variants.removeLast() }
                evicted = storage.answers.set(fill.key, variants, bytes: variants.reduce(0) { $0 + $1.bytes })
            }
            guard storage.fills[fill.key]?.fill === fill else { return ([], evicted, storage.answers.bytes) }
            return (storage.fills.removeValue(forKey: fill.key)?.waiters ?? [], evicted, storage.answers.bytes)
        }
        if evicted > 0 { evictions.increment(by: evicted) }
        storedBytes.record(bytes)
        let turn = end ?? answer.map { .answer($0, stale: false, fwdStatus: nil) } ?? .released
        for waiter in waiters { waiter.turn(turn) }
    }

    /// Purges what `matches` (a route's entries, one URI's, or all); returns how many keys went.
    @discardableResult
    func purge(where matches: (Key) -> Bool) -> Int {
        let (count, bytes) = storage.withLock { ($0.answers.removeAll(where: matches), $0.answers.bytes) }
        storedBytes.record(bytes)
        return count
    }

    /// An unsafe method on `path` went through: what any route stores for
    /// it is invalidated (RFC 9111 section 4.4), whatever its query and key fields.
    func invalidate(path: String) {
        purge { $0.target == path || $0.target.hasPrefix(path + "?") }
    }
}
