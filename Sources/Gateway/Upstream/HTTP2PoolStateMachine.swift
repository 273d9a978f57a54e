/// One endpoint's multiplexed HTTP/2 connection on one event loop, as a
/// value: events in, actions out, no I/O. Calls that come while it connects
/// wait for that one connect; a session whose GOAWAY came takes no new
/// stream, and the next call opens its replacement. Every connect carries
/// its attempt number, so a late result of an earlier one changes nothing.
struct HTTP2PoolStateMachine<Session: AnyObject, Waiter> {
    enum State {
        case none
        case connecting(attempt: UInt64, waiters: [Waiter])
        case ready(Session)
    }

    enum AcquireAction {
        /// Open a stream on this session now.
        case use(Session)
        /// Connect (attempt `attempt`); the waiter gets the session when it is up.
        case connect(attempt: UInt64)
        /// A connect is under way: the waiter gets its session.
        case wait
    }

    private(set) var state = State.none
    private var attempts: UInt64 = 0

    /// `accepts`: whether a session still takes new streams (no GOAWAY yet).
    mutating func acquire(_ waiter: Waiter, accepts: (Session) -> Bool) -> AcquireAction {
        switch state {
        case .ready(let session) where accepts(session):
            return .use(session)
        case .connecting(let attempt, var waiters):
            // The state lets go of the array first, so it grows in place.
            state = .none
            waiters.append(waiter)
            state = .connecting(attempt: attempt, waiters: waiters)
            return .wait
        case .none, .ready:
            attempts &+= 1
            state = .connecting(attempt: attempts, waiters: [waiter])
            return .connect(attempt: attempts)
        }
    }

    /// Connect `attempt` made `session`: its waiters, to be given streams on it.
    mutating func connected(_ session: Session, attempt: UInt64) -> [Waiter] {
        guard case .connecting(attempt, let waiters) = state else { return [] }
        state = .ready(session)
        return waiters
    }

    /// Connect `attempt` failed: its waiters, to be told.
    mutating func connectFailed(attempt: UInt64) -> [Waiter] {
        guard case .connecting(attempt, let waiters) = state else { return [] }
        state = .none
        return waiters
    }

    /// `session`'s connection closed: the next call connects anew.
    mutating func closed(_ session: Session) {
        if case .ready(let current) = state, current === session { state = .none }
    }
}
