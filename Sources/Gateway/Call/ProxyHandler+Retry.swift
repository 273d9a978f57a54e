import NIOCore
import NIOHTTP1
import Rewriter

/// The validator chain and retry policy walked for each try: per-try
/// timeouts, decisions, drained refusals, credential refresh, try log lines.
extension ProxyHandler {
    /// Consults the call's retry state for one try's outcome; returns true when
    /// the handler took care of it (a retry is scheduled, or the call failed).
    /// `responseComplete`: the connection already finished its response (and
    /// went back to its pool), so it is not abandoned.
    func decide(_ outcome: TryOutcome, upstreamStatus: Int?, responseComplete: Bool = false) -> Bool {
        guard let call else { return false }
        if responseComplete { call.connection = nil }
        let budget = call.route.retryBudget
        guard let (decided, verdict) = machine.judge(outcome, now: loopNow, random: &front.random, connectionHeld: call.connection != nil,
                                                     retryAllowed: { budget?.takeRetry() ?? true })
        else { return false }
        logTry(outcome, decided)
        if case .refresh = verdict { front.record.spans?.tryEnded(now: now, sink: front.context.spanSink) }
        if case .response(let status, _, _) = outcome { judgeTry(OutlierConfig.Failure(judged: status, decided, decidedBy: machine.retry?.decidedBy)) }
        switch verdict {
        case .forward:
            return false
        case .refresh(let spec):
            return refreshThenRetry(spec, call: call)
        case .fail(let validator):
            call.connection?.abandon()
            front.record.log.reason = "\(validator) refused the response"
            fail(.validatorFailed(upstream: call.route.upstream.name, status: upstreamStatus, route: call.route.config.name), call)
            return true
        case .drain:
            // Read to its end, so its connection goes back to the pool instead of being closed and re-opened.
            front.record.log.upstreamStatus = nil
            return true
        case .retry(let next):
            front.record.tryDropped(now: now, context: &front.context)
            call.connection?.abandon()
            call.connection = nil
            run(next)
            return true
        }
    }

    /// The route's `refresh` action: take a newer credential, or wait for the
    /// one refresh under way, then replay. A refresh capped by `min_interval`
    /// lets the refused answer through; a failed one fails the call with 502.
    func refreshThenRetry(_ spec: RefreshSpec, call: Call) -> Bool {
        guard let index = call.route.refreshers.firstIndex(where: { $0.spec == spec }) else { return false }
        let refresher = call.route.refreshers[index]
        let timeout = call.route.config.retry?.perTryTimeout ?? call.route.config.timeout ?? Self.defaultTimeout
        let start = refresher.refresh(after: call.credentials[index], through: front.context.pool, timeout: timeout,
                                      maxBodyBytes: shared.config.limits.maxRefreshBodyBytes, metrics: call.route.metrics,
                                      traced: front.record.spans?.refresh(method: spec.method, upstream: refresher.upstream, random: &front.random),
                                      sink: front.context.spanSink)
        let route = call.route
        route.metrics.refresh(start)
        if case .throttled = start {
            shared.logger.warning("refresh skipped: min_interval not passed", metadata: ["route": .string(route.config.name)])
            return false
        }
        call.connection?.abandon()
        call.connection = nil
        front.record.log.upstreamStatus = nil
        switch start {
        case .ready, .throttled:
            run(machine.retry(after: .zero))
        case .wait(let credential):
            guard let token = machine.refreshStarted() else { return true }
            credential.assumeIsolated().whenComplete { [self] result in
                guard machine.isCurrent(token), let call = self.call else { return }
                switch result {
                case .success: run(machine.credentialReady(token))
                case .failure(let error):
                    fail(.refreshFailed(upstream: refresher.upstream.name, error: error, route: route.config.name), call)
                }
            }
        }
        return true
    }

    func logTry(_ outcome: TryOutcome, _ action: RetryState<LoopInstant>.Action) {
        front.record.logTry(outcome, action, decidedBy: machine.retry?.decidedBy, tries: machine.tries, context: shared)
    }
}
