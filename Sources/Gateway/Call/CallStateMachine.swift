import NIOCore

/// The lifecycle of the calls of one HTTP/1.1 connection or HTTP/2 stream,
/// one call at a time, as a value: events in, actions out, no I/O (AHC's
/// `HTTPRequestStateMachine` shape). Every asynchronous step a call starts
/// (modifier hooks, a pool wait, a per-try timer, a backoff, a credential
/// refresh) carries the `Token` current when it started; an event whose
/// token is no longer current belongs to a call that ended or a try that
/// moved on, and is ignored by construction.
///
/// It owns what a call decides with: the one deadline (the route's
/// `timeout`), the one count of tries, the route's validator chain and retry
/// policy walked as an embedded `RetryState` (as AHC's connection machine
/// embeds its request machine), a response held whole for the validators,
/// whether the try's endpoint was judged, and a streamed request body's
/// progress. The runner (`ProxyHandler`) holds only the I/O handles.
struct CallStateMachine<Instant: InstantProtocol & Sendable>: Sendable where Instant.Duration == Duration {
    /// Who started a timer or a completion: the call, and its try.
    struct Token: Hashable, Sendable {
        let call: UInt64
        let attempt: Int
    }

    enum State: Sendable {
        /// No call in flight.
        case idle
        /// The request goes through the route's filters and the embedder's modifiers.
        case modifying(Token)
        /// A pooled connection is on its way (idle, new, or a waiter's turn).
        case acquiring(Token)
        /// The request went out; no response head yet (the per-try timer runs).
        case awaitingHead(Token)
        /// The validators read the body: the answer is held whole until they
        /// judge it (the per-try timer still runs).
        case holding(Token, head: ResponseHead, body: [UInt8])
        /// The response head went to the client: the try can no longer be
        /// timed out or retried.
        case forwarding(Token)
        /// A refused response is read to its end, then the retry waits `delay`.
        case draining(Token, delay: Duration)
        /// Waiting out a retry's backoff.
        case backingOff(Token)
        /// Waiting for a credential refresh before the next try.
        case refreshing(Token)
    }

    enum Action: Equatable, Sendable {
        /// The event is stale: nothing to do.
        case ignore
        case runModifiers(Token)
        case acquireConnection(Token)
        /// The current try ran out of time: abandon its connection, fail it as `timeout`.
        case timeOutTry
        case wait(Token, Duration)
        /// The call's deadline is not reached yet: wake again then.
        case wake(at: Instant)
        /// The call's deadline passed: it ends as a 504, or cut short when
        /// its response already went to the client.
        case timeOutCall(forwarded: Bool)
        /// A streamed request body's part, to the try's connection.
        case sendBody(ByteBuffer)
        case sendEnd
        /// The call is over: the client's reading resumes, so the rest of its body is read (and dropped).
        case resumeClient
        /// The try's response ended and its answer, held whole, goes to the validators; written when they let it through.
        case judgeHeld(head: ResponseHead, body: [UInt8])
        /// The try's response ended: the call is over.
        case finish
    }

    private(set) var state = State.idle
    private var calls: UInt64 = 0
    private var perTryTimeout: Duration?
    /// When the call in flight must be over.
    private(set) var deadline: Instant?
    /// Tries started for the call in flight: a request sent, or a connect that failed.
    private(set) var tries = 0
    /// The one replay of a request that never reached the upstream was used
    /// (or may not be: its body streamed).
    private(set) var replayed = false
    /// That replay was a try the retry policy does not count.
    private var unsentReplays = 0
    /// The route's validators and retry policy walked for this call (nil:
    /// the route has neither).
    private(set) var retry: RetryState<Instant>?
    /// The current try's outcome was told to its endpoint's outlier detection.
    private var judged = true
    private(set) var streamed: StreamedBody?

    var token: Token? {
        switch state {
        case .idle: nil
        case .modifying(let t), .acquiring(let t), .awaitingHead(let t), .holding(let t, _, _), .forwarding(let t), .draining(let t, _),
            .backingOff(let t), .refreshing(let t):
            t
        }
    }

    var inFlight: Bool { token != nil }

    /// The response head went to the client.
    var responseForwarded: Bool {
        if case .forwarding = state { return true }
        return false
    }

    var isDraining: Bool {
        if case .draining = state { return true }
        return false
    }

    var isHolding: Bool {
        if case .holding = state { return true }
        return false
    }

    /// Whether a completion (a failed modifier or pool wait) is the current one's.
    func isCurrent(_ token: Token) -> Bool { self.token == token }

    /// A new call: its first try starts with the modifiers, or at once.
    /// `streams`: its body streams upstream as it arrives (no replay of any
    /// kind, and the client is not read until a connection takes the body).
    mutating func start(now: Instant, timeout: Duration, runsModifiers: Bool, perTryTimeout: Duration?, retry: RetryState<Instant>? = nil,
                        streams: Bool = false) -> Action {
        calls &+= 1
        deadline = now.advanced(by: timeout)
        self.perTryTimeout = perTryTimeout
        self.retry = retry
        self.retry?.deadline = deadline
        replayed = streams
        unsentReplays = 0
        tries = 0
        judged = true
        if streams { streamed = StreamedBody() }
        let token = Token(call: calls, attempt: 1)
        if runsModifiers {
            state = .modifying(token)
            return .runModifiers(token)
        }
        state = .acquiring(token)
        return .acquireConnection(token)
    }

    /// The modifiers finished; a failure ends the call instead (see `end()`).
    mutating func modifiersFinished(_ token: Token) -> Action {
        guard case .modifying(token) = state else { return .ignore }
        state = .acquiring(token)
        return .acquireConnection(token)
    }

    mutating func connectionReady(_ token: Token) -> ConnectionAction {
        guard case .acquiring(token) = state else { return .giveBack }
        state = .awaitingHead(token)
        tries += 1
        judged = false
        guard var body = streamed else { return .send(token, perTryTimeout: perTryTimeout, streamed: nil) }
        let start = StreamedStart(pending: body.pending, end: body.ended)
        body.pending = []
        body.connected = !body.ended
        streamed = body.ended ? nil : body
        return .send(token, perTryTimeout: perTryTimeout, streamed: start)
    }

    /// The connection for `token` could not be made: a try too.
    mutating func connectFailed(_ token: Token) -> Bool {
        guard isCurrent(token) else { return false }
        tries += 1
        return true
    }

    // MARK: The request body that streams

    mutating func bodyPart(_ buffer: ByteBuffer) -> Action {
        guard var body = streamed else { return .ignore }
        if body.connected { return inFlight ? .sendBody(buffer) : .ignore }
        guard inFlight else { return .ignore }
        streamed = nil
        body.pending.append(buffer)
        streamed = body
        return .ignore
    }

    mutating func bodyEnded() -> Action {
        guard var body = streamed else { return .ignore }
        body.ended = true
        if body.connected, inFlight {
            streamed = nil
            return .sendEnd
        }
        if !inFlight {
            streamed = nil
            return .resumeClient
        }
        streamed = body
        return .ignore
    }

    /// The call ended while its body may still come: read on, dropping it.
    mutating func bodyAbandoned() -> Action {
        guard var body = streamed else { return .ignore }
        body.pending = []
        body.connected = false
        streamed = body.ended ? nil : body
        return .resumeClient
    }

    /// The client is gone: no body will come.
    mutating func bodyGone() { streamed = nil }

    /// The upstream connection sends the body as it arrives.
    var bodyConnected: Bool { streamed?.connected == true }

    // MARK: The response

    mutating func perTryTimerFired(_ token: Token) -> Action {
        switch state {
        case .awaitingHead(token), .holding(token, _, _): return .timeOutTry
        default: return .ignore
        }
    }

    /// The try's response head arrived: held whole when something reads the
    /// body (a validator, a filter), judged from the head when there are
    /// validators or a retry policy, else forwarded.
    mutating func responseHead(_ head: ResponseHead, holdsBody: Bool) -> HeadAction {
        guard holdsBody else { return retry == nil ? .forward : .judge }
        if case .awaitingHead(let t) = state { state = .holding(t, head: head, body: []) }
        return .hold
    }

    /// A part of a held body; past `limit` the answer is let through as it
    /// is: returned to be written, the rest streams.
    mutating func heldBody(_ buffer: ByteBuffer, limit: Int) -> (head: ResponseHead, body: [UInt8])? {
        guard case .holding(let t, let head, var body) = state else { return nil }
        // The state lets go of the array first, so it grows in place.
        state = .awaitingHead(t)
        body.append(contentsOf: buffer.readableBytesView)
        guard body.count > limit else {
            state = .holding(t, head: head, body: body)
            return nil
        }
        return (head, body)
    }

    /// The held answer, whole, to be judged (still held: a retry drops it, an accept writes it).
    var held: (head: ResponseHead, body: [UInt8])? {
        guard case .holding(_, let head, let body) = state else { return nil }
        return (head, body)
    }

    /// The try's response ended: a drained refusal's retry starts, a held
    /// answer is judged whole, or the call is over.
    mutating func responseEnded() -> Action {
        if isDraining { return drained() }
        if let held { return .judgeHeld(head: held.head, body: held.body) }
        return .finish
    }

    /// The try failed after `progress`. A drained refusal's retry starts; a
    /// request that provably never reached the upstream is sent once more,
    /// unasked; a failure before the response is judged by the retry policy
    /// (see `judge`); else the call fails (`forward`: the gateway's 502), cut
    /// short when its response already went to the client.
    mutating func tryFailed(_ error: UpstreamError, progress: TryProgress, now: Instant, random: inout some RandomNumberGenerator,
                            retryAllowed: () -> Bool) -> Judged {
        if isDraining { return Judged(verdict: .retry(next: drained())) }
        if progress != .responseStarted {
            if progress == .unsent, error.kind != .connectFailure, let replay = replayUnsent() {
                return Judged(verdict: .retry(next: replay), decided: .retry(after: .zero, reason: "unsent"))
            }
            if retry != nil { return judge(.failure(error), now: now, random: &random, connectionHeld: false, retryAllowed: retryAllowed) }
        }
        return Judged(verdict: responseForwarded ? .cutShort : .forward)
    }

    mutating func responseHeadForwarded() {
        if let token { state = .forwarding(token) }
    }

    /// The try's outcome for the validators and retry policy (nil: the route
    /// has neither). Unsent replays are free: the policy counts the others.
    mutating func tryFinished(_ outcome: TryOutcome, now: Instant, random: inout some RandomNumberGenerator) -> RetryState<Instant>.Action? {
        retry?.tryFinished(outcome, tries: tries - unsentReplays, now: now, random: &random)
    }

    /// Judges the try's outcome and moves on as the verdict says (`forward`,
    /// nothing decided, when the route has no validators or retry policy).
    /// `retryAllowed` asks the route's retry budget for one retry (it is spent
    /// when it says yes); `connectionHeld`: the try's connection still carries
    /// its answer, so a small refused one can be drained to keep it.
    mutating func judge(_ outcome: TryOutcome, now: Instant, random: inout some RandomNumberGenerator, connectionHeld: Bool,
                        retryAllowed: () -> Bool) -> Judged {
        guard var decided = tryFinished(outcome, now: now, random: &random) else { return Judged(verdict: .forward) }
        switch decided {
        case .retry, .refreshThenRetry:
            if !retryAllowed() { decided = .giveUp(reason: "retry budget spent") }
        default:
            break
        }
        switch decided {
        case .accept, .giveUp:
            return Judged(verdict: .forward, decided: decided)
        case .fail(let validator):
            return Judged(verdict: .fail(validator: validator), decided: decided)
        case .refreshThenRetry(let spec):
            return Judged(verdict: .refresh(spec), decided: decided)
        case .retry(let delay, _):
            if connectionHeld, case .response(_, let headers, _) = outcome,
                let length = headers["Content-Length"].flatMap(Int.init), length <= Self.drainLimit
            {
                drainThenRetry(after: delay)
                return Judged(verdict: .drain, decided: decided)
            }
            return Judged(verdict: .retry(next: retry(after: delay)), decided: decided)
        }
    }

    /// The current try's outcome goes to its endpoint's outlier detection once: whether this is that once.
    mutating func judge() -> Bool {
        guard inFlight, !judged else { return false }
        judged = true
        return true
    }

    // MARK: Retries

    /// The try failed or was refused: the next one starts after `delay`.
    mutating func retry(after delay: Duration) -> Action {
        guard let token else { return .ignore }
        let next = Token(call: token.call, attempt: token.attempt + 1)
        guard delay > .zero else {
            state = .acquiring(next)
            return .acquireConnection(next)
        }
        state = .backingOff(next)
        return .wait(next, delay)
    }

    /// A refused response is read to its end first (its connection is kept).
    mutating func drainThenRetry(after delay: Duration) {
        if let token { state = .draining(token, delay: delay) }
    }

    /// The drained response ended (or its connection failed).
    mutating func drained() -> Action {
        guard case .draining(_, let delay) = state else { return .ignore }
        return retry(after: delay)
    }

    mutating func backoffElapsed(_ token: Token) -> Action {
        guard case .backingOff(token) = state else { return .ignore }
        state = .acquiring(token)
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
        guard case .refreshing(token) = state else { return .ignore }
        state = .acquiring(token)
        return .acquireConnection(token)
    }

    /// The request provably never reached the upstream (its connection failed
    /// before a byte of it was written): sent once more, unasked, on another
    /// connection. Nil when that was already done or the body streamed.
    mutating func replayUnsent() -> Action? {
        guard !replayed, case .awaitingHead = state else { return nil }
        replayed = true
        unsentReplays += 1
        return retry(after: .zero)
    }

    // MARK: The end

    /// The timer woke: whether the call in flight ran out of time.
    func deadlinePassed(now: Instant) -> Action {
        guard inFlight, let deadline else { return .ignore }
        guard now >= deadline else { return .wake(at: deadline) }
        return .timeOutCall(forwarded: responseForwarded)
    }

    /// The call is over (answered, failed, or its client went away): every
    /// token it handed out is stale from now on.
    mutating func end() {
        state = .idle
        deadline = nil
        retry = nil
    }
}
