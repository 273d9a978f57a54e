/// Where one pooled HTTP/1.1 upstream connection is, as a value: events in,
/// what to do with the connection out, no I/O. It goes back to the pool only
/// when provably clean: every byte the upstream sent belonged to the answer
/// just read, and that answer's end was set by the upstream's own framing.
/// Anything else closes it, so stray bytes never reach another call.
struct HTTP1UpstreamStateMachine: Hashable, Sendable {
    enum State: Hashable, Sendable {
        /// Not in use (pooled, or not yet handed out): no byte may arrive.
        case idle
        /// A request is out. `keepAlive`: it did not say close.
        case exchanging(keepAlive: Bool)
        /// After a 101: raw bytes both ways, never pooled again.
        case tunnel
        /// Closing or closed: nothing more is read from it as HTTP.
        case closed
    }

    enum Verdict: Hashable, Sendable {
        case reuse
        case close
    }

    private(set) var state = State.idle
    private var poolTold = false

    var isExchanging: Bool {
        if case .exchanging = state { true } else { false }
    }

    mutating func requestStarted(keepAlive: Bool) {
        guard state == .idle else { return }
        state = .exchanging(keepAlive: keepAlive)
    }

    /// Bytes came from the upstream. While idle they answer nothing: the
    /// upstream is out of step (a late body, a second answer), so it closes.
    mutating func bytesArrived() -> Verdict {
        switch state {
        case .exchanging, .tunnel: return .reuse
        case .idle, .closed:
            state = .closed
            return .close
        }
    }

    /// The answer ended. `requestComplete`: its request was written whole
    /// (the exchange's, `UpstreamExchange`); `trailing`: more bytes came right behind it;
    /// `announcedBodyWithheld`: it was body-less by rule (a HEAD's, a 204,
    /// a 304) yet its head announced a body, which a non-conforming upstream
    /// may still send; `mustClose`: its framing or `Connection` said so.
    mutating func responseEnded(requestComplete: Bool, trailing: Bool, announcedBodyWithheld: Bool, mustClose: Bool) -> Verdict {
        guard case .exchanging(let keepAlive) = state else {
            state = .closed
            return .close
        }
        // An unfinished request body leaves the framing broken.
        guard keepAlive, requestComplete, !trailing, !announcedBodyWithheld, !mustClose else {
            state = .closed
            return .close
        }
        state = .idle
        return .reuse
    }

    mutating func switched() { state = .tunnel }

    /// The gateway closes it (a failure, an abandoned call).
    mutating func close() {
        if state != .tunnel { state = .closed }
    }

    /// Closed (by either side). Returns whether the pool is still to be told (once).
    mutating func closed() -> Bool {
        state = .closed
        defer { poolTold = true }
        return !poolTold
    }
}
