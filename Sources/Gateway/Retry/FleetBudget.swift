import Foundation
import NIOCore
import Synchronization

/// `retry.budget: {scope: fleet}`: a route's calls and retries counted in
/// the store, per window, for every gatewayd on it. Windows follow the wall
/// clock (every process agrees which one it is in). A retry taken is sent
/// to the store at once, calls at most every 100 ms, from the calls
/// themselves (no timer); each answer brings back the fleet's totals. A
/// retry is judged on those plus what this process has not sent yet, so no
/// call waits for the store, and the fleet can overshoot by the retries its
/// processes take while their last answer is older than the others' retries.
final class FleetBudget: Sendable {
    let store: RedisClient
    private let budget: RetryPolicy.Budget
    private let prefix: String
    private let flushInterval: Duration
    private let state = Mutex(Counts())

    private struct Counts {
        var window: Int64 = 0
        /// The fleet's totals at the last answer.
        var fleetCalls = 0
        var fleetRetries = 0
        /// Sent, not answered yet.
        var sentCalls = 0
        var sentRetries = 0
        var sending = false
        /// Not sent yet.
        var calls = 0
        var retries = 0
        var lastSent = ContinuousClock.Instant.now - .seconds(3600)

        mutating func enter(_ id: Int64) {
            if id != window { self = Counts(window: id) }
        }
    }

    private static let add = RedisScript("""
        local calls = redis.call('HINCRBY', KEYS[1], 'calls', ARGV[1])
        local retries = redis.call('HINCRBY', KEYS[1], 'retries', ARGV[2])
        redis.call('PEXPIRE', KEYS[1], ARGV[3])
        return {calls, retries}
        """)

    init(budget: RetryPolicy.Budget, route: String, store: RedisClient) {
        self.budget = budget
        self.store = store
        prefix = store.config.keyPrefix + "budget:" + route + ":"
        flushInterval = min(budget.window / 10, .milliseconds(100))
    }

    private var windowID: Int64 { Int64(Date().timeIntervalSince1970 / max(budget.window.seconds, 0.001)) }

    func callStarted() {
        let id = windowID
        state.withLock { counts in
            counts.enter(id)
            counts.calls += 1
        }
        flushIfDue(id)
    }

    func takeRetry() -> Bool {
        let id = windowID
        let taken = state.withLock { counts -> Bool in
            counts.enter(id)
            let calls = counts.fleetCalls + counts.sentCalls + counts.calls
            let retries = counts.fleetRetries + counts.sentRetries + counts.retries
            guard retries < max(budget.minRetries, Int(budget.ratio * Double(calls))) else { return false }
            counts.retries += 1
            return true
        }
        flushIfDue(id)
        return taken
    }

    private func flushIfDue(_ id: Int64) {
        let now = ContinuousClock.now
        let sent = state.withLock { counts -> (calls: Int, retries: Int)? in
            guard !counts.sending, counts.retries > 0 || now - counts.lastSent >= flushInterval else { return nil }
            counts.sending = true
            counts.lastSent = now
            (counts.sentCalls, counts.sentRetries, counts.calls, counts.retries) = (counts.calls, counts.retries, 0, 0)
            return (counts.sentCalls, counts.sentRetries)
        }
        guard let sent else { return }
        let keptMs = String(Int(budget.window.seconds * 2000) + 1000)
        Self.add.run(on: store, keys: [prefix + String(id)], arguments: [String(sent.calls), String(sent.retries), keptMs])
            .whenComplete { result in
                self.state.withLock { counts in
                    guard counts.window == id else { return }
                    counts.sending = false
                    (counts.sentCalls, counts.sentRetries) = (0, 0)
                    if case .success(.array(let totals)) = result, totals.count == 2,
                       let calls = totals[0].count, let retries = totals[1].count {
                        (counts.fleetCalls, counts.fleetRetries) = (calls, retries)
                    } else {
                        // Not counted by the store, as far as this process knows: sent again with the next.
                        counts.calls += sent.calls
                        counts.retries += sent.retries
                    }
                }
            }
    }
}
