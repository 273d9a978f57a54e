import NIOCore
import Rewriter

/// The lifecycle of the calls of one HTTP/1.1 connection or HTTP/2 stream,
/// one call at a time, as a value: events in, one `Action` out, no I/O (AHC's
/// `HTTPRequestStateMachine` shape). It alone decides; the runner
/// (`CallRunner`) performs what it is told and reports what happened.
/// Every asynchronous step a call starts (modifier hooks, a pool wait, a
/// per-try timer, a backoff, a credential refresh) carries the `Token`
/// current when it started; an event whose token is no longer current
/// belongs to a call that ended or a try that moved on, and is ignored by
/// construction.
///
/// A call in flight is a `Flight`: its one deadline (the route's `timeout`),
/// its one count of tries, the route's validator chain and retry policy
/// walked as an embedded `RetryState` (as AHC's connection machine embeds its
/// request machine), and the `Step` it is at. The request body of a
/// pass-through route has a lifecycle of its own (`RequestBody`): it
/// outlives a call answered early, whose rest is read and dropped.
struct CallStateMachine<Instant: InstantProtocol & Sendable>: Sendable where Instant.Duration == Duration {
    /// Who started a timer or a completion: the call, and its try.
    struct Token: Hashable, Sendable {
        let call: UInt64
        let attempt: Int
    }

    enum State: Sendable {
        /// No call in flight.
        case idle
        case inFlight(Flight)
    }

    struct Flight: Sendable {
        var token: Token
        /// When the call must be over.
        let deadline: Instant
        let perTryTimeout: Duration?
        /// Tries started: a request sent, or a connect that failed.
        var tries = 0
        var replay: Replay
        /// The route's validators and retry policy (nil: it has neither).
        var retry: RetryState<Instant>?
        /// The route's `response:` makes the client's answer from the upstream's, held whole.
        let translates: Bool
        /// The route's cache is asked before the first try.
        let caches: Bool
        var step: Step
    }

    /// The one replay of a request that provably never reached the upstream.
    enum Replay: Sendable {
        case available
        /// Used: a try the retry policy does not count.
        case used
        /// Its body streamed: nothing can be sent twice.
        case impossible
    }

    enum Step: Sendable {
        /// The request goes through the route's filters and the embedder's modifiers.
        case modifying
        /// The route's cache is asked.
        case lookingUp
        /// Another call fills the cache's entry: its answer is this call's too (`fillReleased`: it is not).
        case awaitingFill
        /// A pooled connection is on its way (idle, new, or a waiter's turn).
        case acquiring
        /// The request went out; no response head yet (the per-try timer runs).
        /// Its outcome is not yet told to its endpoint.
        case awaitingHead
        /// The validators or filters read the body: the answer is held whole
        /// until it ends (the per-try timer still runs).
        case holding(head: ResponseHead, body: [UInt8])
        /// The held answer, whole, is made the client's by the route's `response:` (`answerTranslated`).
        case translating(head: ResponseHead)
        /// The retry policy wants another try: the route's retry budget is asked.
        case askingBudget(Judging)
        /// The response head went to the client: the try can no longer be timed out or retried.
        case forwarding
        /// A refused response is read to its end, then the retry waits `delay`.
        case draining(delay: Duration)
        /// Waiting out a retry's backoff.
        case backingOff
        /// A credential refresh before the next try; `fallback` is the
        /// refused answer's fate when no refresh can start.
        case refreshing(fallback: Answer)
    }

    private(set) var state = State.idle
    private(set) var streamedBody = RequestBody.idle
    private var calls: UInt64 = 0

    /// Whether a completion (a filter, a modifier, a pool wait) is the current try's.
    func isCurrent(_ token: Token) -> Bool {
        guard case .inFlight(let flight) = state else { return false }
        return flight.token == token
    }

    // MARK: The call

    /// A new call: its first try starts with the modifiers, or at once.
    /// `streams`: its body streams upstream as it arrives (no replay of any
    /// kind, and the client is not read until a connection takes the body).
    /// `translates`: the route's `response:` makes the client's answer from the upstream's, held whole.
    /// `caches`: the route's cache is asked once the modifiers let the request through (the
    /// rate limit has counted it; a hit never reaches the upstream).
    mutating func start(deadline: Instant, runsModifiers: Bool, perTryTimeout: Duration?, retry: RetryState<Instant>? = nil,
                        streams: Bool = false, translates: Bool = false, caches: Bool = false) -> Action {
        calls &+= 1
        let token = Token(call: calls, attempt: 1)
        var flight = Flight(token: token, deadline: deadline, perTryTimeout: perTryTimeout, replay: streams ? .impossible : .available,
                            retry: retry, translates: translates, caches: caches, step: .modifying)
        flight.retry?.deadline = deadline
        if streams { streamedBody = .waiting([], ended: false) }
        state = .inFlight(flight)
        return runsModifiers ? .runModifiers(token) : modifiersFinished(token)
    }

    /// The modifiers let the request through; a refusal ends the call instead (see `end`).
    mutating func modifiersFinished(_ token: Token) -> Action {
        guard case .inFlight(var flight) = state, flight.token == token, case .modifying = flight.step else { return .none }
        flight.step = flight.caches ? .lookingUp : .acquiring
        state = .inFlight(flight)
        return flight.caches ? .lookUp(token) : .acquireConnection(token)
    }

    /// The cache answered a miss: the call fills the entry itself, or
    /// `waits` for the fill under way (a hit ends the call instead, see `end`).
    mutating func lookedUp(_ token: Token, waits: Bool) -> Action {
        guard case .inFlight(var flight) = state, flight.token == token, case .lookingUp = flight.step else { return .none }
        flight.step = waits ? .awaitingFill : .acquiring
        state = .inFlight(flight)
        return waits ? .none : .acquireConnection(token)
    }

    /// The fill waited for stored nothing this call may use: it goes upstream itself.
    mutating func fillReleased(_ token: Token) -> Action {
        guard case .inFlight(var flight) = state, flight.token == token, case .awaitingFill = flight.step else { return .none }
        flight.step = .acquiring
        state = .inFlight(flight)
        return .acquireConnection(token)
    }

    mutating func connectionReady(_ token: Token) -> Action {
        guard case .inFlight(var flight) = state, flight.token == token, case .acquiring = flight.step else { return .giveBack }
        flight.step = .awaitingHead
        flight.tries += 1
        state = .inFlight(flight)
        return .send(token, tries: flight.tries, perTryTimeout: flight.perTryTimeout, streamed: streamedBody.connect())
    }

    /// The connection for `token` could not be made: a try too.
    mutating func connectFailed(_ token: Token, _ error: UpstreamError, now: Instant, random: inout some RandomNumberGenerator) -> Action {
        guard case .inFlight(var flight) = state, flight.token == token else { return .none }
        flight.tries += 1
        state = .inFlight(flight)
        return tryFailed(error, progress: .unsent, now: now, random: &random)
    }

    // MARK: The request body

    mutating func requestBody(_ buffer: ByteBuffer) -> Action { streamedBody.part(buffer, inFlight: isInFlight) }

    mutating func requestEnded() -> Action { streamedBody.ended(inFlight: isInFlight) }

    /// The try's connection can take more: a paused streamed body is read again.
    func upstreamWritable() -> Action { streamedBody.resumesOnWritable }

    // MARK: The response

    mutating func perTryTimerFired(_ token: Token) -> Action {
        guard case .inFlight(let flight) = state, flight.token == token else { return .none }
        switch flight.step {
        case .awaitingHead, .holding: return .timeOutTry
        default: return .none
        }
    }

    /// The try's response head arrived: held whole when something reads the
    /// body (a validator, a filter), judged from the head when the route has
    /// validators or a retry policy, else forwarded.
    mutating func responseHead(_ head: ResponseHead, holdsBody: Bool, now: Instant, random: inout some RandomNumberGenerator) -> Action {
        guard case .inFlight(var flight) = state, case .awaitingHead = flight.step else { return .none }
        if holdsBody || flight.translates {
            flight.step = .holding(head: head, body: [])
            state = .inFlight(flight)
            return .none
        }
        let status = Int(head.status.code)
        guard flight.retry != nil else { return .forwardHead(flight.tryEnd(status: status)) }
        return moving(&flight) { $0.judge(.response(status: status, headers: head.headers, body: nil), answer: .head, connectionHeld: true, tells: true,
                     now: now, random: &random) }
    }

    /// The response head went to the client.
    mutating func responseHeadForwarded() -> Action {
        guard case .inFlight(var flight) = state else { return .none }
        flight.step = .forwarding
        state = .inFlight(flight)
        return .none
    }

    /// A part of the answer: forwarded, held (past `limit` the held answer
    /// is let through as it is, and the rest streams), or drained.
    mutating func upstreamBody(_ buffer: ByteBuffer, limit: Int) -> Action {
        guard case .inFlight(var flight) = state else { return .none }
        switch flight.step {
        case .holding(let head, var body):
            // The state lets go of the array first, so it grows in place.
            flight.step = .awaitingHead
            state = .inFlight(flight)
            body.append(contentsOf: buffer.readableBytesView)
            guard body.count > limit else {
                flight.step = .holding(head: head, body: body)
                state = .inFlight(flight)
                return .none
            }
            // An answer to translate never reaches the client as it came.
            if flight.translates { return .answerTooLarge(flight.tryEnd(failure: nil)) }
            return .letThrough(head: head, body: body, flight.tryEnd(status: Int(head.status.code)))
        case .draining:
            return .none
        default:
            return .forwardBody(buffer)
        }
    }

    /// The upstream's read batch ended: what was forwarded goes out.
    func upstreamReadComplete() -> Action {
        guard case .inFlight(let flight) = state, case .forwarding = flight.step else { return .none }
        return .flush
    }

    /// The try's response ended: a drained refusal's retry starts, a held
    /// answer is judged whole, or the call is over.
    mutating func responseEnded(now: Instant, random: inout some RandomNumberGenerator) -> Action {
        guard case .inFlight(var flight) = state else { return .finish }
        switch flight.step {
        case .draining(let delay):
            return moving(&flight) { $0.nextTry(after: delay, end: nil, drop: false) }
        case .holding(let head, let body):
            // The state lets go of the answer: the runner may edit it.
            flight.step = .awaitingHead
            state = .inFlight(flight)
            if flight.translates {
                flight.step = .translating(head: head)
                state = .inFlight(flight)
                return .translate(head: head, body: body)
            }
            let status = Int(head.status.code)
            guard flight.retry != nil else {
                return .writeHeld(head: head, body: body, flight.tryEnd(status: status))
            }
            return moving(&flight) { $0.judge(.response(status: status, headers: head.headers, body: body), answer: .held(head: head, body: body),
                         connectionHeld: false, tells: true, now: now, random: &random) }
        default:
            return .finish
        }
    }

    /// The try failed after `progress`. A drained refusal's retry starts; a
    /// request that provably never reached the upstream is sent once more,
    /// unasked; a failure before the response is judged by the retry policy;
    /// else the call fails (the gateway's 502), cut short when its response
    /// already went to the client.
    mutating func tryFailed(_ error: UpstreamError, progress: TryProgress, now: Instant, random: inout some RandomNumberGenerator) -> Action {
        guard case .inFlight(var flight) = state else { return .none }
        let tells = flight.step.awaitsVerdict
        let end = TryEnd(tries: flight.tries, tellsEndpoint: tells, failure: OutlierConfig.Failure(error.kind))
        if case .draining(let delay) = flight.step { return moving(&flight) { $0.nextTry(after: delay, end: end, drop: true) } }
        if case .forwarding = flight.step { return .cutShort(error, end) }
        if progress == .unsent, error.kind != .connectFailure, case .available = flight.replay, case .awaitingHead = flight.step {
            flight.replay = .used
            var replayed = end
            replayed.decided = .retry(after: .zero, reason: "unsent")
            replayed.decidedBy = flight.retry?.decidedBy
            replayed.byCondition = flight.retry?.decidedByCondition ?? false
            replayed.result = .failure(error.name)
            return moving(&flight) { $0.nextTry(after: .zero, end: replayed, drop: true) }
        }
        guard flight.retry != nil, progress != .responseStarted else { return .failTry(error, end) }
        return moving(&flight) { $0.judge(.failure(error), answer: .failure(error), connectionHeld: false, tells: tells, now: now, random: &random) }
    }

    /// The route's `response:` made the held answer the client's (or could
    /// not): judged as the upstream's status over the decoded document.
    mutating func answerTranslated(_ translation: AnswerTranslation, now: Instant, random: inout some RandomNumberGenerator) -> Action {
        guard case .inFlight(var flight) = state, case .translating(let upstream) = flight.step else { return .none }
        flight.step = .awaitingHead
        state = .inFlight(flight)
        let answer: Answer, document: [UInt8]?
        switch translation {
        case .answer(let decoded, let head, let body): (answer, document) = (.held(head: head, body: body), decoded)
        case .error(let decoded, let problem): (answer, document) = (.problem(problem), decoded)
        case .untranslatable(let problem): (answer, document) = (.problem(problem), nil)
        }
        let status = Int(upstream.status.code)
        guard flight.retry != nil else {
            let end = flight.tryEnd(status: status)
            return moving(&flight) { $0.letThrough(answer, end) }
        }
        return moving(&flight) { $0.judge(.response(status: status, headers: upstream.headers, body: document), answer: answer, connectionHeld: false, tells: true,
                     now: now, random: &random) }
    }

    /// The retry budget answered `askBudget`: the retry is spent, or the try given up.
    mutating func budgetAnswered(_ allowed: Bool) -> Action {
        guard case .inFlight(var flight) = state, case .askingBudget(var judging) = flight.step else { return .none }
        if !allowed { judging.decided = .giveUp(reason: "retry budget spent") }
        return moving(&flight) { $0.settle(judging) }
    }

    // MARK: Retries

    mutating func backoffElapsed(_ token: Token) -> Action {
        guard case .inFlight(var flight) = state, flight.token == token, case .backingOff = flight.step else { return .none }
        flight.step = .acquiring
        state = .inFlight(flight)
        return .acquireConnection(token)
    }

    mutating func credentialReady(_ token: Token) -> Action {
        guard case .inFlight(var flight) = state, flight.token == token, case .refreshing = flight.step else { return .none }
        flight.step = .acquiring
        state = .inFlight(flight)
        return .acquireConnection(token)
    }

    mutating func credentialFailed(_ token: Token, _ problem: Problem) -> Action {
        guard case .inFlight(let flight) = state, flight.token == token, case .refreshing = flight.step else { return .none }
        return .respond(problem, nil)
    }

    /// No refresh could start (throttled, or no refresher for it): the refused answer goes through.
    mutating func refreshUnavailable(_ token: Token) -> Action {
        guard case .inFlight(var flight) = state, flight.token == token, case .refreshing(let fallback) = flight.step else { return .none }
        return moving(&flight) { $0.letThrough(fallback, nil) }
    }

    // MARK: The end

    /// The timer woke: whether the call in flight ran out of time.
    func deadlinePassed(now: Instant) -> Action {
        guard case .inFlight(let flight) = state else { return .none }
        guard now >= flight.deadline else { return .wake(at: flight.deadline) }
        if case .forwarding = flight.step { return .timeOutCall(forwarded: true) }
        return .timeOutCall(forwarded: false)
    }

    /// The client broke its framing: its answer, under way, is cut; else
    /// the call is abandoned and the client told `problem`.
    func malformedRequest(_ problem: Problem) -> Action {
        guard case .inFlight(let flight) = state, case .forwarding = flight.step else { return .rejectRequest(problem) }
        return .closeClient
    }

    /// The call is over (answered, failed, or its client went away): every
    /// token it handed out is stale from now on. A streamed body still to
    /// come is read and dropped, unless the client is gone.
    mutating func end(clientGone: Bool = false) -> Action {
        state = .idle
        return streamedBody.callEnded(clientGone: clientGone)
    }

    private var isInFlight: Bool {
        if case .inFlight = state { return true }
        return false
    }

    /// A transition of the flight in progress, kept as the call's state.
    private mutating func moving(_ flight: inout Flight, _ transition: (inout Flight) -> Action) -> Action {
        let action = transition(&flight)
        state = .inFlight(flight)
        return action
    }
}
