import Synchronization

/// Whether the gateway serves: listening, and not draining.
public final class ServingStatus: Sendable {
    private let state = Mutex((ready: false, draining: false))

    /// Listening and not draining: `/readyz` answers 200.
    public var isReady: Bool { state.withLock { $0.ready && !$0.draining } }

    func set(ready: Bool) { state.withLock { $0.ready = ready } }
    func set(draining: Bool) { state.withLock { $0.draining = draining } }
}
