import NIOCore
import Synchronization

/// Envoy-style retry budget for one route, shared by every event loop: within
/// each `window`, retries may be at most `ratio` of the calls, but
/// `minRetries` are always allowed, so retries cannot multiply load during
/// an outage. With `scope: fleet` and a store, the fleet's counts decide
/// (`FleetBudget`) and this process's own are the fallback while the store is down.
final class RetryBudget: Sendable {
    private struct Window {
        var id: Int64
        var calls = 0
        var retries = 0
    }

    let budget: RetryPolicy.Budget
    let fleet: FleetBudget?
    private let window = Mutex(Window(id: 0))

    init(_ budget: RetryPolicy.Budget, fleet: FleetBudget? = nil) {
        self.budget = budget
        self.fleet = fleet
    }

    private var windowID: Int64 {
        let length = max(1, budget.window.nanosecondCount)
        return Int64(NIODeadline.now().uptimeNanoseconds / UInt64(length))
    }

    func callStarted() {
        fleet?.callStarted()
        let id = windowID
        window.withLock { w in
            if w.id != id { w = Window(id: id) }
            w.calls += 1
        }
    }

    /// Takes one retry from the budget when there is one left.
    func takeRetry() -> Bool {
        let fleetDecides = fleet.map { $0.store.isAvailable } ?? false
        let taken = fleetDecides ? fleet!.takeRetry() : nil
        let id = windowID
        return window.withLock { w in
            if w.id != id { w = Window(id: id) }
            let allowed = max(budget.minRetries, Int(budget.ratio * Double(w.calls)))
            guard taken ?? (w.retries < allowed) else { return false }
            w.retries += 1
            return true
        }
    }
}
