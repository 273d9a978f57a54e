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

    /// A try's outcome whose verdict waits for the retry budget.
    struct Judging: Sendable {
        var outcome: TryOutcome
        var decided: RetryState<Instant>.Action
        var answer: Answer
        var connectionHeld: Bool
        var tellsEndpoint: Bool
    }

    /// What a try came to, as the client would get it when it is let through.
    enum Answer: Equatable, Sendable {
        /// A response head the runner holds.
        case head
        /// A response held whole.
        case held(head: ResponseHead, body: [UInt8])
        /// The gateway's answer instead (an answer `response:` cannot translate, or one of its `errors`).
        case problem(Problem)
        case failure(UpstreamError)
    }

    /// What a judged try leaves for the access log and its endpoint's outlier detection.
    struct TryEnd: Equatable, Sendable {
        var tries: Int
        /// Its outcome goes to its endpoint's outlier detection (once per try): `failure`, or fine.
        var tellsEndpoint: Bool
        var failure: OutlierConfig.Failure?
        /// What the retry policy decided, for the try's log line (nil: it decided nothing).
        var decided: RetryState<Instant>.Action?
        var decidedBy: String?
        var byCondition = false
        var result: TryLog.Result?
    }

    enum Action: Equatable, Sendable {
        /// Nothing to do (the event is stale, or only moved the state).
        case none
        case runModifiers(Token)
        case acquireConnection(Token)
        /// Send the request on the connection that arrived (`streamed`: its
        /// head, then the body parts read meanwhile, and the body's end when
        /// it came); when the route has one, arm a per-try timer carrying `token`.
        case send(Token, tries: Int, perTryTimeout: Duration?, streamed: StreamedStart?)
        /// The call or try the connection was for is over: back to its pool.
        case giveBack
        /// A request body's part that is not streamed: read into the call's buffer.
        case bufferBody(ByteBuffer)
        /// A streamed request body's part, to the try's connection.
        case sendBody(ByteBuffer)
        case sendEnd
        /// The client's reading resumes (the upstream takes more, or the rest of the body is read and dropped).
        case resumeClient
        /// The call's deadline is not reached yet: wake again then.
        case wake(at: Instant)
        /// The call's deadline passed: it ends as a 504, or cut short when its response already went to the client.
        case timeOutCall(forwarded: Bool)
        /// The current try ran out of time: abandon its connection, fail it as `timeout`.
        case timeOutTry
        /// Ask the route's retry budget for one retry (`budgetAnswered`).
        case askBudget
        /// The response head the runner holds goes to the client.
        case forwardHead(TryEnd?)
        /// A part of the answer goes to the client.
        case forwardBody(ByteBuffer)
        /// The answer's parts of this read go out.
        case flush
        /// The held answer went past the limit: it is let through as it is, the rest streams.
        case letThrough(head: ResponseHead, body: [UInt8], TryEnd?)
        /// The held answer, whole and accepted, goes to the client: the call is over.
        case writeHeld(head: ResponseHead, body: [UInt8], TryEnd?)
        /// The held answer, whole, goes through the route's `response:` (`answerTranslated`).
        case translate(head: ResponseHead, body: [UInt8])
        /// The answer to translate is larger than it may be held: a 502, its connection dropped.
        case answerTooLarge(TryEnd?)
        /// The refused answer is read to its end on its connection, which is kept; the retry follows.
        case drain(TryEnd)
        /// The try is dropped with its connection; the next starts after `after`.
        case retry(Token, after: Duration, TryEnd?)
        /// Wait out a backoff, then `backoffElapsed`.
        case backOff(Token, Duration)
        /// A credential refresh, then the try `next` (`credentialReady`, `credentialFailed`, `refreshUnavailable`).
        case startRefresh(RefreshSpec, next: Token, TryEnd)
        /// The client gets a 502 naming `validator`.
        case refuse(validator: String, status: Int?, TryEnd)
        /// The try failed with no try left: the gateway's 502.
        case failTry(UpstreamError, TryEnd?)
        /// The try failed after its response went to the client: cut short.
        case cutShort(UpstreamError, TryEnd?)
        /// The call ends with the gateway's answer.
        case respond(Problem, TryEnd?)
        /// The client broke its framing while its answer was under way: close.
        case closeClient
        /// The client broke its framing: the call is abandoned and the client gets `problem`, then the connection closes.
        case rejectRequest(Problem)
        /// The try's response ended: the call is over.
        case finish
    }

    struct StreamedStart: Equatable, Sendable {
        var pending: [ByteBuffer]
        var end: Bool
    }

    /// A pass-through route's request body, streamed as it arrives.
    enum RequestBody: Sendable {
        /// Nothing streams: the body is read whole before its call, or ended.
        case idle
        /// Parts read before the try's connection was ready (`ended`: all of it).
        case waiting([ByteBuffer], ended: Bool)
        /// Each part goes to the try's connection as it arrives.
        case connected
        /// Its call is over: the rest is read and dropped.
        case dropping
    }

    /// Refused answers up to this size are drained, not dropped with their connection.
    static var drainLimit: Int { 64 * 1024 }

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
    mutating func start(deadline: Instant, runsModifiers: Bool, perTryTimeout: Duration?, retry: RetryState<Instant>? = nil,
                        streams: Bool = false, translates: Bool = false) -> Action {
        calls &+= 1
        let token = Token(call: calls, attempt: 1)
        var flight = Flight(token: token, deadline: deadline, perTryTimeout: perTryTimeout, replay: streams ? .impossible : .available,
                            retry: retry, translates: translates, step: runsModifiers ? .modifying : .acquiring)
        flight.retry?.deadline = deadline
        if streams { streamedBody = .waiting([], ended: false) }
        state = .inFlight(flight)
        return runsModifiers ? .runModifiers(token) : .acquireConnection(token)
    }

    /// The modifiers let the request through; a refusal ends the call instead (see `end`).
    mutating func modifiersFinished(_ token: Token) -> Action {
        guard case .inFlight(var flight) = state, flight.token == token, case .modifying = flight.step else { return .none }
        flight.step = .acquiring
        state = .inFlight(flight)
        return .acquireConnection(token)
    }

    mutating func connectionReady(_ token: Token) -> Action {
        guard case .inFlight(var flight) = state, flight.token == token, case .acquiring = flight.step else { return .giveBack }
        flight.step = .awaitingHead
        flight.tries += 1
        state = .inFlight(flight)
        let streamed: StreamedStart?
        switch streamedBody {
        case .idle, .dropping:
            streamed = nil
        case .connected:
            streamed = StreamedStart(pending: [], end: false)
        case .waiting(let pending, let ended):
            streamed = StreamedStart(pending: pending, end: ended)
            streamedBody = ended ? .idle : .connected
        }
        return .send(token, tries: flight.tries, perTryTimeout: flight.perTryTimeout, streamed: streamed)
    }

    /// The connection for `token` could not be made: a try too.
    mutating func connectFailed(_ token: Token, _ error: UpstreamError, now: Instant, random: inout some RandomNumberGenerator) -> Action {
        guard case .inFlight(var flight) = state, flight.token == token else { return .none }
        flight.tries += 1
        state = .inFlight(flight)
        return tryFailed(error, progress: .unsent, now: now, random: &random)
    }

    // MARK: The request body

    mutating func requestBody(_ buffer: ByteBuffer) -> Action {
        switch streamedBody {
        case .idle: return .bufferBody(buffer)
        case .connected: return isInFlight ? .sendBody(buffer) : .none
        case .dropping: return .none
        case .waiting(var pending, let ended):
            guard isInFlight else { return .none }
            // The state lets go of the array first, so it grows in place.
            streamedBody = .idle
            pending.append(buffer)
            streamedBody = .waiting(pending, ended: ended)
            return .none
        }
    }

    mutating func requestEnded() -> Action {
        switch streamedBody {
        case .idle:
            return .none
        case .connected:
            streamedBody = .idle
            return isInFlight ? .sendEnd : .resumeClient
        case .dropping:
            streamedBody = .idle
            return .resumeClient
        case .waiting(let pending, _):
            guard isInFlight else {
                streamedBody = .idle
                return .resumeClient
            }
            streamedBody = .waiting(pending, ended: true)
            return .none
        }
    }

    /// The try's connection can take more: a paused streamed body is read again.
    mutating func upstreamWritable() -> Action {
        if case .connected = streamedBody { return .resumeClient }
        return .none
    }

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
        guard flight.retry != nil else { return .forwardHead(tryEnd(flight, failure: status >= 500 ? .status5xx : nil)) }
        return judge(&flight, .response(status: status, headers: head.headers, body: nil), answer: .head, connectionHeld: true, tells: true,
                     now: now, random: &random)
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
            if flight.translates { return .answerTooLarge(tryEnd(flight, failure: nil)) }
            return .letThrough(head: head, body: body, tryEnd(flight, failure: head.status.code >= 500 ? .status5xx : nil))
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
            return nextTry(&flight, after: delay, end: nil, drop: false)
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
                return .writeHeld(head: head, body: body, tryEnd(flight, failure: status >= 500 ? .status5xx : nil))
            }
            return judge(&flight, .response(status: status, headers: head.headers, body: body), answer: .held(head: head, body: body),
                         connectionHeld: false, tells: true, now: now, random: &random)
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
        if case .draining(let delay) = flight.step { return nextTry(&flight, after: delay, end: end, drop: true) }
        if case .forwarding = flight.step { return .cutShort(error, end) }
        if progress == .unsent, error.kind != .connectFailure, case .available = flight.replay, case .awaitingHead = flight.step {
            flight.replay = .used
            var replayed = end
            replayed.decided = .retry(after: .zero, reason: "unsent")
            replayed.decidedBy = flight.retry?.decidedBy
            replayed.byCondition = flight.retry?.decidedByCondition ?? false
            replayed.result = .failure(error.name)
            return nextTry(&flight, after: .zero, end: replayed, drop: true)
        }
        guard flight.retry != nil, progress != .responseStarted else { return .failTry(error, end) }
        return judge(&flight, .failure(error), answer: .failure(error), connectionHeld: false, tells: tells, now: now, random: &random)
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
        guard flight.retry != nil else { return letThrough(&flight, answer, tryEnd(flight, failure: status >= 500 ? .status5xx : nil)) }
        return judge(&flight, .response(status: status, headers: upstream.headers, body: document), answer: answer, connectionHeld: false, tells: true,
                     now: now, random: &random)
    }

    // MARK: The verdict

    /// Walks the route's validators and retry policy over the try's outcome;
    /// a retry first asks the route's budget. `tells`: the outcome is still
    /// to be told to the try's endpoint.
    private mutating func judge(_ flight: inout Flight, _ outcome: TryOutcome, answer: Answer, connectionHeld: Bool, tells: Bool, now: Instant,
                                random: inout some RandomNumberGenerator) -> Action {
        let unsent = flight.replay == .used ? 1 : 0
        guard let decided = flight.retry?.tryFinished(outcome, tries: flight.tries - unsent, now: now, random: &random) else {
            return letThrough(&flight, answer, nil)
        }
        let judging = Judging(outcome: outcome, decided: decided, answer: answer, connectionHeld: connectionHeld, tellsEndpoint: tells)
        switch decided {
        case .retry, .refreshThenRetry:
            flight.step = .askingBudget(judging)
            state = .inFlight(flight)
            return .askBudget
        default:
            return settle(&flight, judging)
        }
    }

    /// The retry budget answered `askBudget`: the retry is spent, or the try given up.
    mutating func budgetAnswered(_ allowed: Bool) -> Action {
        guard case .inFlight(var flight) = state, case .askingBudget(var judging) = flight.step else { return .none }
        if !allowed { judging.decided = .giveUp(reason: "retry budget spent") }
        return settle(&flight, judging)
    }

    /// Moves on as the verdict says.
    private mutating func settle(_ flight: inout Flight, _ judging: Judging) -> Action {
        var end = TryEnd(tries: flight.tries, tellsEndpoint: judging.tellsEndpoint, decided: judging.decided, decidedBy: flight.retry?.decidedBy,
                         byCondition: flight.retry?.decidedByCondition ?? false)
        switch judging.outcome {
        case .response(let status, _, _):
            end.result = .status(status)
            end.failure = OutlierConfig.Failure(judged: status, judging.decided, decidedBy: end.decidedBy)
        case .failure(let error):
            end.result = .failure(error.name)
            end.failure = OutlierConfig.Failure(error.kind)
        }
        switch judging.decided {
        case .accept, .giveUp:
            return letThrough(&flight, judging.answer, end)
        case .fail(let validator):
            return .refuse(validator: validator, status: judging.outcome.status, end)
        case .refreshThenRetry(let spec):
            let next = Token(call: flight.token.call, attempt: flight.token.attempt + 1)
            flight.token = next
            flight.step = .refreshing(fallback: judging.answer)
            state = .inFlight(flight)
            return .startRefresh(spec, next: next, end)
        case .retry(let delay, _):
            if judging.connectionHeld, case .response(_, let headers, _) = judging.outcome,
                let length = headers["Content-Length"].flatMap(Int.init), length <= Self.drainLimit
            {
                flight.step = .draining(delay: delay)
                state = .inFlight(flight)
                return .drain(end)
            }
            return nextTry(&flight, after: delay, end: end, drop: true)
        }
    }

    /// The try's answer goes to the client as it is (a failure as the gateway's 502).
    private mutating func letThrough(_ flight: inout Flight, _ answer: Answer, _ end: TryEnd?) -> Action {
        switch answer {
        case .head:
            flight.step = .awaitingHead
            state = .inFlight(flight)
            return .forwardHead(end)
        case .held(let head, let body):
            flight.step = .awaitingHead
            state = .inFlight(flight)
            return .writeHeld(head: head, body: body, end)
        case .problem(let problem):
            return .respond(problem, end)
        case .failure(let error):
            return .failTry(error, end)
        }
    }

    // MARK: Retries

    /// The next try starts after `delay` (`drop`: the current try's connection goes first).
    private mutating func nextTry(_ flight: inout Flight, after delay: Duration, end: TryEnd?, drop: Bool) -> Action {
        let next = Token(call: flight.token.call, attempt: flight.token.attempt + 1)
        flight.token = next
        flight.step = delay > .zero ? .backingOff : .acquiring
        state = .inFlight(flight)
        if drop { return .retry(next, after: delay, end) }
        return delay > .zero ? .backOff(next, delay) : .acquireConnection(next)
    }

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
        return letThrough(&flight, fallback, nil)
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
        switch streamedBody {
        case .idle:
            return .none
        case _ where clientGone:
            streamedBody = .idle
            return .none
        case .waiting(_, let ended):
            streamedBody = ended ? .idle : .dropping
            return .resumeClient
        case .connected, .dropping:
            streamedBody = .dropping
            return .resumeClient
        }
    }

    private var isInFlight: Bool {
        if case .inFlight = state { return true }
        return false
    }

    private func tryEnd(_ flight: Flight, failure: OutlierConfig.Failure?) -> TryEnd {
        TryEnd(tries: flight.tries, tellsEndpoint: flight.step.awaitsVerdict, failure: failure)
    }
}

extension CallStateMachine.Step {
    /// The try's outcome is not yet told to its endpoint's outlier detection.
    fileprivate var awaitsVerdict: Bool {
        switch self {
        case .awaitingHead, .holding, .translating: true
        default: false
        }
    }
}
