import NIOCore

/// The life of one HTTP/2 client connection as a value, in the manner of
/// Hummingbird's `HTTP2ServerConnectionManager.StateMachine`: events in,
/// one action out, no I/O. It owns the connection's clocks — GOAWAY once
/// idle for idle_timeout with no stream open, a PING when the peer has gone
/// silent that long with streams open (closing if nothing answers within
/// `pingTimeout`) — and the drain: GOAWAY's notice, then the final GOAWAY
/// after a grace or when the last stream ends (RFC 9113 §6.8). The streams'
/// own deadlines are their calls'.
struct HTTP2ConnectionStateMachine: Sendable {
    enum State: Hashable, Sendable {
        /// Serving; the peer last sent anything at `lastRead`.
        case active(lastRead: NIODeadline, Drain)
        /// Streams open and the peer silent for idle_timeout: a PING went at
        /// `sent`, and any frame answers it.
        case pinged(sent: NIODeadline, Drain)
        /// The connection is gone: nothing is checked any more.
        case closed
    }

    /// Where a graceful stop is.
    enum Drain: Hashable, Sendable {
        case serving
        /// GOAWAY's shutdown notice went: streams already on their way are
        /// still served; the final GOAWAY follows.
        case noticeSent
        /// The final GOAWAY went (drain or idle): no new streams.
        case goneAway
    }

    enum Action: Hashable, Sendable {
        case none
        /// Check again then.
        case wake(at: NIODeadline)
        /// Send a PING, and check again at `wakeAt`.
        case ping(wakeAt: NIODeadline)
        /// GOAWAY's shutdown notice now; `grace` later, `graceEnded`.
        case sendNotice(grace: TimeAmount)
        /// GOAWAY(NO_ERROR) naming the last stream processed: the
        /// connection ends once the streams in flight have.
        case goAway
        /// The peer is gone: close the connection.
        case close
    }

    /// How long a PING may go unanswered (any frame counts) before the peer is taken for gone.
    static let pingTimeout = TimeAmount.seconds(20)
    /// How long after the notice the final GOAWAY goes: a round trip's
    /// grace for requests already on their way.
    static let drainGrace = TimeAmount.seconds(1)

    let idleTimeout: TimeAmount
    private(set) var state: State

    init(now: NIODeadline, idleTimeout: TimeAmount) {
        self.idleTimeout = idleTimeout
        state = .active(lastRead: now, .serving)
    }

    /// The first wake-up: the idle check.
    var firstWake: Action { if case .active(let lastRead, _) = state { .wake(at: lastRead + idleTimeout) } else { .none } }

    /// The peer sent something: it is alive, and a PING in flight is answered.
    mutating func read(now: NIODeadline) {
        switch state {
        case .active(_, let drain), .pinged(_, let drain): state = .active(lastRead: now, drain)
        case .closed: break
        }
    }

    /// The connection's timer woke (it is shared with the streams' deadlines,
    /// so it may be early for this check).
    mutating func timerFired(now: NIODeadline, streamsOpen: Bool) -> Action {
        switch state {
        case .pinged(let sent, _):
            if now - sent >= Self.pingTimeout {
                state = .closed
                return .close
            }
            return .wake(at: sent + Self.pingTimeout)
        case .active(let lastRead, let drain):
            guard now - lastRead >= idleTimeout else { return .wake(at: lastRead + idleTimeout) }
            guard streamsOpen else {
                if drain == .goneAway { return .none }
                state = .active(lastRead: lastRead, .goneAway)
                return .goAway
            }
            state = .pinged(sent: now, drain)
            return .ping(wakeAt: now + Self.pingTimeout)
        case .closed:
            return .none
        }
    }

    /// Graceful stop (drain): with no stream open the final GOAWAY goes at
    /// once; otherwise the notice, and the final one after the grace.
    mutating func quiesce(streamsOpen: Bool) -> Action {
        guard drain == .serving else { return .none }
        setDrain(streamsOpen ? .noticeSent : .goneAway)
        return streamsOpen ? .sendNotice(grace: Self.drainGrace) : .goAway
    }

    /// The notice's grace is over.
    mutating func graceEnded() -> Action { finalGoAway() ?? .none }

    /// The last open stream closed: a drain's final GOAWAY goes now; else the idle check restarts.
    mutating func lastStreamClosed(now: NIODeadline) -> Action {
        if let goAway = finalGoAway() { return goAway }
        if case .closed = state { return .none }
        return .wake(at: now + idleTimeout)
    }

    /// The connection is gone.
    mutating func closed() { state = .closed }

    private mutating func finalGoAway() -> Action? {
        guard drain == .noticeSent else { return nil }
        setDrain(.goneAway)
        return .goAway
    }

    private var drain: Drain? {
        switch state {
        case .active(_, let drain), .pinged(_, let drain): drain
        case .closed: nil
        }
    }

    private mutating func setDrain(_ drain: Drain) {
        switch state {
        case .active(let lastRead, _): state = .active(lastRead: lastRead, drain)
        case .pinged(let sent, _): state = .pinged(sent: sent, drain)
        case .closed: break
        }
    }
}
