import Rewriter

/// A try's verdict, as transitions of the flight it belongs to: the route's
/// validators and retry policy walked over its outcome, the budget asked
/// for a retry, then the answer let through, a drain, a refresh or the next
/// try. The machine keeps what they leave as the call's state.
extension CallStateMachine {
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

    /// Refused answers up to this size are drained, not dropped with their connection.
    static var drainLimit: Int { 64 * 1024 }
}

extension CallStateMachine.Flight {
    typealias Action = CallStateMachine.Action
    typealias Answer = CallStateMachine.Answer
    typealias Judging = CallStateMachine.Judging
    typealias TryEnd = CallStateMachine.TryEnd
    typealias Token = CallStateMachine.Token

    /// Walks the route's validators and retry policy over the try's outcome;
    /// a retry first asks the route's budget. `tells`: the outcome is still
    /// to be told to the try's endpoint.
    mutating func judge(_ outcome: TryOutcome, answer: Answer, connectionHeld: Bool, tells: Bool, now: Instant,
                        random: inout some RandomNumberGenerator) -> Action {
        let unsent = replay == .used ? 1 : 0
        guard let decided = retry?.tryFinished(outcome, tries: tries - unsent, now: now, random: &random) else {
            return letThrough(answer, nil)
        }
        let judging = Judging(outcome: outcome, decided: decided, answer: answer, connectionHeld: connectionHeld, tellsEndpoint: tells)
        switch decided {
        case .retry, .refreshThenRetry:
            step = .askingBudget(judging)
            return .askBudget
        default:
            return settle(judging)
        }
    }

    /// Moves on as the verdict says.
    mutating func settle(_ judging: Judging) -> Action {
        var end = TryEnd(tries: tries, tellsEndpoint: judging.tellsEndpoint, decided: judging.decided, decidedBy: retry?.decidedBy,
                         byCondition: retry?.decidedByCondition ?? false)
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
            return letThrough(judging.answer, end)
        case .fail(let validator):
            return .refuse(validator: validator, status: judging.outcome.status, end)
        case .refreshThenRetry(let spec):
            let next = Token(call: token.call, attempt: token.attempt + 1)
            token = next
            step = .refreshing(fallback: judging.answer)
            return .startRefresh(spec, next: next, end)
        case .retry(let delay, _):
            if judging.connectionHeld, case .response(_, let headers, _) = judging.outcome,
                let length = headers["Content-Length"].flatMap(Int.init), length <= CallStateMachine.drainLimit
            {
                step = .draining(delay: delay)
                    return .drain(end)
            }
            return nextTry(after: delay, end: end, drop: true)
        }
    }

    /// The try's answer goes to the client as it is (a failure as the gateway's 502).
    mutating func letThrough(_ answer: Answer, _ end: TryEnd?) -> Action {
        switch answer {
        case .head:
            step = .awaitingHead
            return .forwardHead(end)
        case .held(let head, let body):
            step = .awaitingHead
            return .writeHeld(head: head, body: body, end)
        case .problem(let problem):
            return .respond(problem, end)
        case .failure(let error):
            return .failTry(error, end)
        }
    }

    // MARK: Retries

    /// The next try starts after `delay` (`drop`: the current try's connection goes first).
    mutating func nextTry(after delay: Duration, end: TryEnd?, drop: Bool) -> Action {
        let next = Token(call: token.call, attempt: token.attempt + 1)
        token = next
        step = delay > .zero ? .backingOff : .acquiring
        if drop { return .retry(next, after: delay, end) }
        return delay > .zero ? .backOff(next, delay) : .acquireConnection(next)
    }

    /// What the try leaves when nothing judges it: its outcome for its endpoint.
    func tryEnd(failure: OutlierConfig.Failure?) -> TryEnd {
        TryEnd(tries: tries, tellsEndpoint: step.awaitsVerdict, failure: failure)
    }

    /// The same for an answer nothing judged: a 5xx is a failure of its endpoint.
    func tryEnd(status: Int) -> TryEnd { tryEnd(failure: status >= 500 ? .status5xx : nil) }
}

extension CallStateMachine.Step {
    /// The try's outcome is not yet told to its endpoint's outlier detection.
    var awaitsVerdict: Bool {
        switch self {
        case .awaitingHead, .holding, .translating: true
        default: false
        }
    }
}
