import Rewriter

/// One call's walk through its route's validator chain and retry policy,
/// written as a state machine with explicit events and actions (AHC's shape),
/// generic over its instants so it is tested without I/O or real time. The
/// gateway runs it on the event loop's `LoopInstant`: a resilient instant
/// (ContinuousClock's) left its layout to the runtime, and every copy of a
/// call's state went through value witnesses. The policy is the route's,
/// immutable; this state is the call's own.
package struct RetryState<Instant: InstantProtocol & Sendable>: Sendable where Instant.Duration == Duration {
    package enum Action: Sendable, Equatable {
        /// Hand this try's answer to the client.
        case accept
        /// The client gets a 502 problem naming `validator`.
        case fail(validator: String)
        /// Try again after `delay`; `reason` labels logs and metrics.
        case retry(after: Duration, reason: String)
        /// Call the refresh request, then try again.
        case refreshThenRetry(RefreshSpec)
        /// No try left (or not allowed): the last answer goes to the client as
        /// it is, or a transport failure becomes a 502 (504 once the deadline passed).
        case giveUp(reason: String)
    }

    package let policy: RetryPolicy?
    package let validators: [ValidatorSpec]
    /// The embedder's validators, after the configured ones.
    package let custom: [any ResponseValidator]
    private let route: String
    /// The call's deadline, which its state machine owns and sets.
    package var deadline: Instant?
    /// The request's body is buffered, so it can be replayed byte for byte.
    package let replayable: Bool
    private let methodAllowed: Bool
    /// What decided the last try's fate: a validator's label, a retry
    /// condition, or nil when nothing in the chain spoke.
    package private(set) var decidedBy: String?
    /// `decidedBy` is a `retry.on` condition, not a validator (the validator metric counts validators only).
    package private(set) var decidedByCondition = false

    package init(
        policy: RetryPolicy?, validators: [ValidatorSpec], custom: [any ResponseValidator] = [], route: String = "",
        method: String, replayable: Bool, deadline: Instant?
    ) {
        self.policy = policy
        self.validators = validators
        self.custom = custom
        self.route = route
        self.deadline = deadline
        self.replayable = replayable
        methodAllowed = policy?.methods.contains(method) ?? false
    }

    /// Try number `tries` (counted by the call's state machine) ended with
    /// `outcome` at `now` (`unixTime`: the wall clock, read only for a
    /// `Retry-After` date, when not given): what happens next.
    package mutating func tryFinished(
        _ outcome: TryOutcome, tries: Int, now: Instant, unixTime: Int64? = nil, random: inout some RandomNumberGenerator
    ) -> Action {
        decidedBy = nil
        decidedByCondition = false
        var body = ParsedBody(outcome.body)
        var answers: [(ValidatorSpec.Action, String)] = []
        for validator in validators {
            let answer = validator.evaluate(outcome, body: &body)
            answers.append((answer, validator.label))
            if case .next = answer { continue }
            break
        }
        if answers.last.map({ if case .next = $0.0 { true } else { false } }) ?? true {
            answers += custom.lazy.map { ($0.validate(outcome, route: self.route), $0.label) }
        }
        for (answer, label) in answers {
            if case .next = answer { continue }
            decidedBy = label
            switch answer {
            case .next: continue
            case .accept: return .accept
            case .pass: return .accept
            case .fail: return .fail(validator: label)
            case .retry: return retryIfAllowed(reason: label, outcome: outcome, tries: tries, now: now, unixTime: unixTime, random: &random)
            case .refresh(let spec):
                if let refusal = refusal(tries: tries, now: now, delay: .zero) { return .giveUp(reason: "\(label): \(refusal)") }
                return .refreshThenRetry(spec)
            }
        }
        if let condition = matchingCondition(outcome) {
            decidedBy = condition
            decidedByCondition = true
            return retryIfAllowed(reason: condition, outcome: outcome, tries: tries, now: now, unixTime: unixTime, random: &random)
        }
        if case .failure(let error) = outcome { return .giveUp(reason: error.name) }
        return .accept
    }

    private func matchingCondition(_ outcome: TryOutcome) -> String? {
        guard let policy else { return nil }
        for condition in policy.on {
            switch (condition, outcome) {
            case (.status(let range), .response(let status, _, _)) where range.contains(status): return "status-\(status)"
            case (.failure(let kind), .failure(let e)) where e.kind == kind:
                return e.name
            default: continue
            }
        }
        return nil
    }

    private func retryIfAllowed(
        reason: String, outcome: TryOutcome, tries: Int, now: Instant, unixTime: Int64?, random: inout some RandomNumberGenerator
    ) -> Action {
        guard let policy else { return .giveUp(reason: "\(reason): no retry policy") }
        var delay = policy.backoff.delay(forRetry: tries, random: &random)
        if policy.honorRetryAfter, case .response(_, let headers, _) = outcome, let value = headers["Retry-After"] {
            // Seconds, or an HTTP date (a date already past means now).
            if let seconds = Int64(value), seconds >= 0 {
                delay = .seconds(seconds)
            } else if let date = HTTPDate.parse(value) {
                delay = .seconds(max(0, date - (unixTime ?? HTTPDate.now())))
            }
        }
        if let refusal = refusal(tries: tries, now: now, delay: delay) { return .giveUp(reason: "\(reason): \(refusal)") }
        return .retry(after: delay, reason: reason)
    }

    /// Why no further try may start (nil: it may): attempts remain, the
    /// method may be retried, the body can be replayed, and the deadline
    /// leaves room for the wait and (when bounded) the try.
    private func refusal(tries: Int, now: Instant, delay: Duration) -> String? {
        guard let policy else { return "no retry policy" }
        if tries >= policy.attempts { return "attempts spent" }
        if !methodAllowed { return "method not in retry.methods" }
        if !replayable { return "the request body streamed upstream unbuffered, no replay" }
        if let deadline, now.advanced(by: delay + (policy.perTryTimeout ?? .zero)) >= deadline { return "the deadline leaves no room" }
        return nil
    }
}
