import Logging

/// What a judged try means beyond its call: the retry state a route's call
/// walks, what the verdict says about the endpoint, and the try's log line
/// and metrics.
extension RetryState where Instant == LoopInstant {
    /// The validators and retry policy a call of `route` walks (nil: it has
    /// neither); its deadline is the call's, set by the call's machine.
    init?(route: Route, custom: [any ResponseValidator], method: String, replayable: Bool) {
        // Asked of the route first: copying its config costs ~400 instructions.
        guard route.judgesTries || !custom.isEmpty else { return nil }
        let config = route.config
        route.retryBudget?.callStarted()
        self.init(policy: config.retry, validators: config.validate, custom: custom, route: config.name, method: method,
                  replayable: replayable, deadline: nil)
    }

}

/// One line per try on routes with a validator chain or retries (the try's
/// outcome, what decided, what happens next), and the metrics of the decision.
enum TryLog {
    /// What the try came to, for its line: a status, or a failure's name.
    enum Result: Equatable, Sendable {
        case status(Int)
        case failure(String)
    }

    static func record(_ outcome: Result, _ action: RetryState<LoopInstant>.Action, decidedBy: String?, byCondition: Bool, try tries: Int,
                       route: String, requestID: String, metrics: RouteMetrics, logger: Logger?) {
        let result: String
        switch outcome {
        case .status(let status): result = String(status)
        case .failure(let name): result = name
        }
        var next: String, delay = Duration.zero
        switch action {
        case .accept: next = "accept"
        case .fail: next = "fail"
        case .giveUp(let reason): next = "give-up: \(reason)"
        case .retry(let after, let reason):
            next = "retry"
            delay = after
            metrics.retried(reason: reason)
        case .refreshThenRetry: next = "refresh"
        }
        if let decidedBy, !byCondition { metrics.validator(decidedBy, action: next.prefix { $0 != ":" }.description) }
        // Numbers as numbers (StructuredLogHandler writes a JSON number for an integer).
        logger?.info("try", metadata: [
            "route": .string(route), "request_id": .string(requestID), "try": .stringConvertible(tries),
            "result": .string(result), "decided_by": .string(decidedBy ?? "-"), "next": .string(next),
            "delay_ms": .stringConvertible(delay.nanosecondCount / 1_000_000),
        ])
    }
}

extension OutlierConfig.Failure {
    /// What a judged answer means for its endpoint: refused by a validator
    /// (`fail` or `retry`), a 5xx, or fine (nil). A credential refresh says
    /// nothing about the endpoint.
    init?<Instant>(judged status: Int, _ action: RetryState<Instant>.Action, decidedBy: String?) {
        switch action {
        case .refreshThenRetry: return nil
        case .fail, .retry, .giveUp:
            if let decidedBy, !decidedBy.hasPrefix("status-") {
                self = .validator
                return
            }
        case .accept: break
        }
        guard status >= 500 else { return nil }
        self = .status5xx
    }
}
