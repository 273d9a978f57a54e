/// The lifecycle of the calls of one HTTP/1.1 connection or HTTP/2 stream,
/// one call at a time, as a value: events in, actions out, no I/O (AHC's
/// `HTTPRequestStateMachine` shape). Every asynchronous step a call starts
/// (modifier hooks, a pool wait, a per-try timer, a backoff, a credential
/// refresh) carries the `Token` current when it started; an event whose
/// token is no longer current belongs to a call that ended or a try that
/// moved on, and is ignored by construction. It owns the call's deadline
/// (the route's `timeout`), read against whatever clock `Instant` is from.
struct CallStateMachine<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    /// Who started a timer or a completion: the call, and its try.
    struct Token: Hashable, Sendable {
        let call: UInt64
        let attempt: Int
    }

    enum State: Hashable, Sendable {
        /// No call in flight.
        case idle
        /// The embedder's request modifiers run.
        case modifying(Token)
        /// A pooled connection is on its way (idle, new, or a waiter's turn).
        case connecting(Token)
        /// The request went out; no response head yet (the per-try timer runs).
        case awaitingHead(Token)
        /// The response head arrived; `forwarded`: it went to the client, so
        /// the try can no longer be timed out or retried.
        case receiving(Token, forwarded: Bool)
        /// A refused response is read to its end, then the retry waits `delay`.
        case draining(Token, delay: Duration)
        /// Waiting out a retry's backoff.
        case backingOff(Token)
        /// Waiting for a credential refresh before the next try.
        case refreshing(Token)
    }

    enum Action: Hashable, Sendable {
        /// The event is stale: nothing to do.
        case ignore
        case runModifiers(Token)
        case acquireConnection(Token)
        /// Send the request on the connection just acquired and, when the
        /// route has one, arm a per-try timer carrying `token`.
        case send(Token, perTryTimeout: Duration?)
        /// A connection arrived for a call or try that is over: back to its pool.
        case returnConnection
        /// The current try ran out of time: abandon its connection, fail it as `timeout`.
        case timeOutTry
        case wait(Token, Duration)
        /// The call's deadline is not reached yet: wake again then.
        case wake(at: Instant)
        /// The call's deadline passed: it ends as a 504, or cut short when
        /// its response already went to the client.
        case timeOutCall(forwarded: Bool)
    }

    private(set) var state = State.idle
    private var calls: UInt64 = 0
    private var perTryTimeout: Duration?
    /// When the call in flight must be over.
    private(set) var deadline: Instant?
    /// The one replay of a request that never reached the upstream was used.
    private(set) var replayed = false

    var token: Token? {
        switch state {
        case .idle: nil
        case .modifying(let t), .connecting(let t), .awaitingHead(let t), .receiving(let t, _), .draining(let t, _),
            .backingOff(let t), .refreshing(let t):
            t
        }
    }

    var inFlight: Bool { state != .idle }

    /// The response head went to the client.
    var responseForwarded: Bool {
        if case .receiving(_, true) = state { return true }
        return false
    }

    /// A new call: its first try starts with the modifiers, or at once.
    /// `replayable`: false when the body streams (no replay of any kind).
    mutating func start(now: Instant, timeout: Duration, runsModifiers: Bool, perTryTimeout: Duration?,
                        replayable: Bool = true) -> Action {
        calls &+= 1
        deadline = now.advanced(by: timeout)
        self.perTryTimeout = perTryTimeout
        replayed = !replayable
        let token = Token(call: calls, attempt: 1)
        if runsModifiers {
            state = .modifying(token)
            return .runModifiers(token)
        }
        state = .connecting(token)
        return .acquireConnection(token)
    }

    /// The modifiers finished; `false` from the caller's side means they failed
    /// and the call ends (see `end()`).
    mutating func modifiersFinished(_ token: Token) -> Action {
        guard state == .modifying(token) else { return .ignore }
        state = .connecting(token)
        return .acquireConnection(token)
    }

    /// Whether a completion (a failed modifier or pool wait) is the current one's.
    func isCurrent(_ token: Token) -> Bool { self.token == token }

    mutating func connectionReady(_ token: Token) -> Action {
        guard state == .connecting(token) else { return .returnConnection }
        state = .awaitingHead(token)
        return .send(token, perTryTimeout: perTryTimeout)
    }

    mutating func perTryTimerFired(_ token: Token) -> Action {
        switch state {
        case .awaitingHead(token), .receiving(token, forwarded: false): return .timeOutTry
        default: return .ignore
        }
    }

    mutating func responseHeadArrived() {
        if case .awaitingHead(let t) = state { state = .receiving(t, forwarded: false) }
    }

    mutating func responseHeadForwarded() {
        if let token { state = .receiving(token, forwarded: true) }
    }

    /// The try failed or was refused: the next one starts after `delay`.
    mutating func retry(after delay: Duration) -> Action {
        guard let token else { return .ignore }
        let next = Token(call: token.call, attempt: token.attempt + 1)
        guard delay > .zero else {
            state = .connecting(next)
            return .acquireConnection(next)
        }
        state = .backingOff(next)
        return .wait(next, delay)
    }

    /// A refused response is read to its end first (its connection is kept).
    mutating func drainThenRetry(after delay: Duration) {
        if let token { state = .draining(token, delay: delay) }
    }

    var isDraining: Bool {
        if case .draining = state { return true }
        return false
    }

    /// The drained response ended (or its connection failed).
    mutating func drained() -> Action {
        guard case .draining(_, let delay) = state else { return .ignore }
        return retry(after: delay)
    }

    mutating func backoffElapsed(_ token: Token) -> Action {
        guard state == .backingOff(token) else { return .ignore }
        state = .connecting(token)
        return .acquireConnection(token)
    }

    /// A credential refresh is under way; the try after it carries the returned token.
    mutating func refreshStarted() -> Token? {
        guard let token else { return nil }
        let next = Token(call: token.call, attempt: token.attempt + 1)
        state = .refreshing(next)
        return next
    }

    mutating func credentialReady(_ token: Token) -> Action {
        guard state == .refreshing(token) else { return .ignore }
        state = .connecting(token)
        return .acquireConnection(token)
    }

    /// The request provably never reached the upstream (its connection failed
    /// before a byte of it was written): sent once more, unasked, on another
    /// connection. Nil when that was already done or the body streamed.
    mutating func replayUnsent() -> Action? {
        guard !replayed, case .awaitingHead = state else { return nil }
        replayed = true
        return retry(after: .zero)
    }

    /// The timer woke: whether the call in flight ran out of time.
    func deadlinePassed(now: Instant) -> Action {
        guard state != .idle, let deadline else { return .ignore }
        guard now >= deadline else { return .wake(at: deadline) }
        return .timeOutCall(forwarded: responseForwarded)
    }

    /// The call is over (answered, failed, or its client went away): every
    /// token it handed out is stale from now on.
    mutating func end() {
        state = .idle
        deadline = nil
    }
}
