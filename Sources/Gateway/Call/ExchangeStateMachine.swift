/// Where one HTTP/1.1 connection or one HTTP/2 stream is between a request
/// and its response, as a value: events in, decisions out, no I/O. It owns
/// the client-side wait (header_timeout for the first head, idle_timeout
/// between requests and between the parts of a body read before its call
/// starts; the call's own deadline is `CallStateMachine`'s), the drain
/// decision, and that every exchange is logged exactly once.
struct ExchangeStateMachine<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    enum Phase: Hashable, Sendable {
        /// Waiting for a request head: the first, or the next on a kept-alive connection.
        case awaitingHead
        /// A head arrived. `reading`: its body has not ended; `responding`:
        /// its response has not; `logged`: its access line is written.
        case exchanging(reading: Bool, responding: Bool, logged: Bool)
        /// The client is gone.
        case closed
    }

    /// What a passed client-side wait means.
    enum Expiry: Hashable, Sendable {
        /// Not yet: wake again then.
        case notYet(Instant)
        /// No (complete) request head came in time: close the connection.
        case noHead
        /// A request body stopped coming (nginx: client_body_timeout): 408.
        case bodyStalled
    }

    private(set) var phase = Phase.awaitingHead
    /// Draining: the response in flight is the last.
    private(set) var quiescing = false
    private(set) var deadline: Instant?

    var isIdle: Bool { phase == .awaitingHead }

    /// The connection is up: a request head must come within `timeout`.
    mutating func connectionStarted(now: Instant, headerTimeout: Duration) -> Instant {
        wait(now.advanced(by: headerTimeout))
    }

    mutating func requestHead() {
        phase = .exchanging(reading: true, responding: true, logged: false)
        deadline = nil
    }

    /// A buffered body is being read: it must keep coming, `idleTimeout` at most between parts.
    mutating func bodyExpected(now: Instant, idleTimeout: Duration) -> Instant {
        wait(now.advanced(by: idleTimeout))
    }

    /// The call took over the timing (its deadline is the call's).
    mutating func callStarted() { deadline = nil }

    mutating func requestEnded() {
        guard case .exchanging(_, let responding, let logged) = phase else { return }
        phase = responding ? .exchanging(reading: false, responding: true, logged: logged) : .awaitingHead
    }

    /// Whether the exchange's access line is still to be written: true once
    /// per exchange, and never for a connection waiting for a head.
    mutating func logOnce() -> Bool {
        guard case .exchanging(let reading, let responding, false) = phase else { return false }
        phase = .exchanging(reading: reading, responding: responding, logged: true)
        return true
    }

    /// The response ended. Returns whether the connection stays open, and
    /// arms the wait for the next head when it does and `idleTimeout` is given
    /// (HTTP/1.1; an HTTP/2 stream carries one exchange).
    mutating func responseEnded(keepAlive: Bool, now: Instant, idleTimeout: Duration?) -> (keepOpen: Bool, wake: Instant?) {
        if case .exchanging(let reading, _, let logged) = phase {
            phase = reading ? .exchanging(reading: true, responding: false, logged: logged) : .awaitingHead
        }
        guard keepAlive, !quiescing else { return (false, nil) }
        guard let idleTimeout else { return (true, nil) }
        return (true, wait(now.advanced(by: idleTimeout)))
    }

    /// The timer woke: what the current wait's end means, if it passed.
    mutating func timerFired(now: Instant) -> Expiry? {
        guard let deadline else { return nil }
        guard now >= deadline else { return .notYet(deadline) }
        self.deadline = nil
        switch phase {
        case .awaitingHead, .exchanging(reading: false, _, _): return .noHead
        case .exchanging(reading: true, _, _): return .bodyStalled
        case .closed: return nil
        }
    }

    /// A malformed request: nothing after it is read, and the connection
    /// closes — after a problem, unless this exchange's response already ended.
    enum Malformed: Hashable, Sendable {
        /// Answer it; `forCurrentRequest`: its head arrived and is the one answered.
        case answer(forCurrentRequest: Bool)
        case close
    }

    mutating func malformed() -> Malformed {
        deadline = nil
        switch phase {
        case .exchanging(reading: true, responding: true, let logged):
            phase = .exchanging(reading: false, responding: true, logged: logged)
            return .answer(forCurrentRequest: true)
        case .exchanging(reading: true, responding: false, _), .closed:
            phase = .closed
            return .close
        case .awaitingHead, .exchanging(reading: false, _, _):
            phase = .exchanging(reading: false, responding: true, logged: false)
            return .answer(forCurrentRequest: false)
        }
    }

    /// Graceful stop (drain). Returns whether nothing is in flight, so the
    /// connection can close now.
    mutating func quiesce() -> Bool {
        quiescing = true
        return isIdle
    }

    /// The connection or stream is gone (its exchange is logged first, see `logOnce`).
    mutating func clientGone() {
        phase = .closed
        deadline = nil
    }

    private mutating func wait(_ until: Instant) -> Instant {
        deadline = until
        return until
    }
}
