import NIOCore
import NIOHTTP1
import Rewriter

/// The validator chain and retry policy walked for each try: per-try
/// timeouts, decisions, drained refusals, credential refresh, try log lines.
extension ProxyHandler {
    func retryState(_ route: Route, method: String, replayable: Bool) -> RetryState<LoopInstant>? {
        // Asked of the route first: copying its config costs ~400 instructions.
        guard route.judgesTries || !shared.validators.isEmpty else { return nil }
        let config = route.config
        route.retryBudget?.callStarted()
        // Its deadline is the call's, set by the call's machine.
        return RetryState(policy: config.retry, validators: config.validate, custom: shared.validators, route: config.name,
                          method: method, replayable: replayable, deadline: nil)
    }

    /// Consults the call's retry state for one try's outcome; returns true when
    /// the handler took care of it (a retry is scheduled, or the call failed).
    /// `responseComplete`: the connection already finished its response (and
    /// went back to its pool), so it is not abandoned.
    func decide(_ outcome: TryOutcome, upstreamStatus: Int?, responseComplete: Bool = false) -> Bool {
        guard let call else { return false }
        if responseComplete { call.connection = nil }
        let budget = call.route.retryBudget
        guard let (decided, verdict) = machine.judge(outcome, now: loopNow, random: &random, connectionHeld: call.connection != nil,
                                                     retryAllowed: { budget?.takeRetry() ?? true })
        else { return false }
        logTry(outcome, decided)
        if case .response(let status, _, _) = outcome { judgeTry(Self.outlierFailure(status: status, decided, by: machine.retry?.decidedBy)) }
        switch verdict {
        case .forward:
            return false
        case .refresh(let spec):
            return refreshThenRetry(spec, call: call)
        case .fail(let validator):
            call.connection?.abandon()
            endCall()
            log.reason = "\(validator) refused the response"
            respond(.validatorFailed(upstream: call.route.upstream.name, status: upstreamStatus, route: call.route.config.name),
                   to: call.requestHead, requestID: call.requestID)
            return true
        case .drain:
            // Read to its end, so its connection goes back to the pool instead of being closed and re-opened.
            log.upstreamStatus = nil
            return true
        case .retry(let next):
            log.upstreamStatus = nil
            call.connection?.abandon()
            call.connection = nil
            run(next)
            return true
        }
    }

    /// What a judged answer means for its endpoint: refused by a validator
    /// (`fail` or `retry`), a 5xx, or fine. A credential refresh says
    /// nothing about the endpoint.
    static func outlierFailure(status: Int, _ action: RetryState<LoopInstant>.Action, by decidedBy: String?) -> OutlierConfig.Failure? {
        switch action {
        case .refreshThenRetry: return nil
        case .fail, .retry, .giveUp:
            if let decidedBy, !decidedBy.hasPrefix("status-") { return .validator }
        case .accept: break
        }
        return status >= 500 ? .status5xx : nil
    }

    /// The refused response being drained ended (or its connection failed):
    /// the retry starts.
    func drained() -> Bool {
        guard machine.isDraining else { return false }
        call?.connection = nil
        run(machine.drained())
        return true
    }

    /// The route's `refresh` action: take a newer credential, or wait for the
    /// one refresh under way, then replay. A refresh capped by `min_interval`
    /// lets the refused answer through; a failed one fails the call with 502.
    func refreshThenRetry(_ spec: RefreshSpec, call: Call) -> Bool {
        guard let index = call.route.refreshers.firstIndex(where: { $0.spec == spec }) else { return false }
        let refresher = call.route.refreshers[index]
        let metrics = call.route.metrics
        let start = refresher.refresh(after: call.credentials[index], on: client.eventLoop) {
            let timeout = call.route.config.retry?.perTryTimeout ?? call.route.config.timeout ?? Self.defaultTimeout
            return pool.exchange(spec.request(to: refresher.upstream), upstream: refresher.upstream, timeout: timeout,
                                 maxBodyBytes: shared.config.limits.maxRefreshBodyBytes)
                .flatMapThrowing { answer in try spec.capture(status: answer.status, body: answer.body) }
                .always { metrics.refreshFinished(ok: (try? $0.get()) != nil) }
        }
        let route = call.route
        route.metrics.refresh(start)
        if case .throttled = start {
            shared.logger.warning("refresh skipped: min_interval not passed", metadata: ["route": .string(route.config.name)])
            return false
        }
        call.connection?.abandon()
        call.connection = nil
        log.upstreamStatus = nil
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
                    endCall()
                    respond(.refreshFailed(upstream: refresher.upstream.name, error: error, route: route.config.name),
                           to: call.requestHead, requestID: call.requestID)
                }
            }
        }
        return true
    }

    /// The captured credentials go into every try of the route.
    func applyCredentials() {
        guard let refreshers = call?.route.refreshers, !refreshers.isEmpty else { return }
        var credentials: [Int] = []
        for refresher in refreshers {
            let credential = refresher.current
            credentials.append(credential.generation)
            if let value = credential.value { call?.request.headers.set(refresher.spec.captureHeader, value) }
        }
        call?.credentials = credentials
    }

    /// One line per try on routes with a validator chain or retries: the try's
    /// outcome, what decided, and what happens next.
    func logTry(_ outcome: TryOutcome, _ action: RetryState<LoopInstant>.Action) {
        let decidedBy = machine.retry?.decidedBy
        let metrics = routeMetrics ?? shared.metrics.unrouted
        let result: String
        switch outcome {
        case .response(let status, _, _): result = String(status)
        case .failure(let error): result = error.name
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
        if let decider = decidedBy { metrics.validator(decider, action: next.prefix { $0 != ":" }.description) }
        guard shared.accessLog != nil else { return }
        shared.logger.info("try", metadata: [
            "route": .string(log.route), "request_id": .string(log.requestID), "try": .stringConvertible(machine.tries),
            "result": .string(result), "decided_by": .string(decidedBy ?? "-"), "next": .string(next),
            "delay_ms": .stringConvertible(delay.nanosecondCount / 1_000_000),
        ])
    }
}
