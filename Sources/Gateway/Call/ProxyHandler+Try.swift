import NIOCore
import Rewriter

/// A try: an endpoint picked, a pooled connection taken (or waited for),
/// the request sent on it (a streamed body as it arrives); its outcome
/// judged by the validators and the retry policy.
extension ProxyHandler {
    /// A try starts on an endpoint the upstream's balance picks (another
    /// than the last try's, when one may take it); the built-in `echo`
    /// upstream answers at once. Past `max_requests` or `max_pending` the
    /// call is answered 503 at once instead of waiting for its deadline.
    func acquire(_ token: CallMachine.Token) {
        guard let call else { return }
        call.takeCredentials()
        guard let state = shared.routeUpstreams[call.route.index] else {
            let answer = front.echo(call)
            endCall()
            return front.answerEcho(answer, route: call.route)
        }
        var breaker = state.breakerOpen(waiting: false)
        if breaker == nil {
            let endpoint = state.pick(exclude: call.endpoint?.index, random: front.random.next())
            front.tryStarted(call, on: endpoint)
            breaker = front.context.pool.connection(for: call, to: endpoint, of: state, now: now, runner: self, token: token)
        }
        guard let breaker else { return }
        // The upstream untouched: 503 with Retry-After.
        end(.problem(.overloaded(limit: breaker, on: call.route), headers: ["Retry-After": "1"], close: call.streams))
    }

    /// The connect for this try failed (a try too); false when the try was over already.
    func connectFailed(_ error: UpstreamError, _ token: CallMachine.Token) -> Bool {
        guard machine.connectFailed(token) else { return false }
        call?.waiter = nil
        // A try that failed to connect is a try: the metric counts it as the access line does.
        call?.route.metrics.tries?.increment()
        front.record.log.tries = machine.tries
        upstreamFailed(error, progress: .unsent)
        return true
    }

    /// Whether the call took the connection (false: its try is over, the
    /// connection goes to someone else).
    func connectionReady(_ connection: any UpstreamConnection, _ token: CallMachine.Token) -> Bool {
        guard case .send(_, let perTryTimeout, let streamed) = machine.connectionReady(token), let call else { return false }
        call.attach(connection)
        call.route.metrics.tries?.increment()
        front.record.trySent(tries: machine.tries, to: connection.peerAddress, now: now)
        if let perTryTimeout { call.perTryTimer = schedule(in: perTryTimeout) { $0.perTryTimerFired(token) } }
        guard let streamed else {
            connection.send(call.request, delegate: self)
            return true
        }
        connection.sendHead(call.request, delegate: self)
        // The connection may have failed inside that write, ending the try.
        guard machine.isCurrent(token) else { return true }
        for buffer in streamed.pending { connection.sendBody(buffer) }
        if streamed.end { connection.sendEnd() }
        // A body read whole leaves nothing to hold back: an HTTP/2 stream credits what it received
        // (an HTTP/1.1 connection's machine lifted its pause at the body's end).
        if streamed.end || connection.isWritable { client.setReading(true) }
        return true
    }

    func upstreamFailed(_ error: UpstreamError, progress: TryProgress) {
        guard let call else { return }
        front.record.tryFailed(error, now: now, context: &front.context)
        call.connection = nil
        // A drained refusal was judged already: this is a no-op for it.
        judgeTry(OutlierConfig.Failure(error.kind))
        let judged = machine.tryFailed(error, progress: progress, now: loopNow, random: &front.random, retryAllowed: call.route.takeRetry)
        if perform(judged, .failure(error), call) { return }
        end(.problem(.upstreamFailed(error, on: call.route)))
    }

    /// The current try's outcome, told once to its endpoint's outlier
    /// detection; `failure`: what made it fail, nil when it did not.
    func judgeTry(_ failure: OutlierConfig.Failure?) {
        guard machine.judge(), let endpoint = call?.endpoint else { return }
        endpoint.upstream.tryEnded(endpoint, failure: failure)
    }

    /// The validators and retry policy on the try's answer; false when it goes to the client.
    func judged(status: Int, headers: HeaderList, body: [UInt8]?) -> Bool {
        guard let call else { return false }
        let outcome = TryOutcome.response(status: status, headers: headers, body: body)
        let judged = machine.judge(outcome, now: loopNow, random: &front.random, connectionHeld: call.connection != nil,
                                   retryAllowed: call.route.takeRetry)
        if let decided = judged.decided { judgeTry(OutlierConfig.Failure(judged: status, decided, decidedBy: machine.retry?.decidedBy)) }
        return perform(judged, outcome, call)
    }

    /// Performs a try's verdict; false when its outcome goes to the client
    /// as it is (an answer; a failure as the gateway's 502).
    func perform(_ judged: CallMachine.Judged, _ outcome: TryOutcome, _ call: Call) -> Bool {
        if let decided = judged.decided {
            front.record.logTry(outcome, decided, decidedBy: machine.retry?.decidedBy, byCondition: machine.retry?.decidedByCondition ?? false,
                                tries: machine.tries, context: shared)
        }
        switch judged.verdict {
        case .forward:
            return false
        case .refresh(let spec):
            guard let (refresher, start) = front.startRefresh(spec, for: call) else { return false }
            call.dropConnection()
            guard case .wait(let credential) = start else {
                run(machine.retry(after: .zero))
                return true
            }
            guard let token = machine.refreshStarted() else { return true }
            credential.assumeIsolated().whenComplete { [self] result in
                guard machine.isCurrent(token) else { return }
                guard case .failure(let error) = result else { return run(machine.credentialReady(token)) }
                end(.problem(.refreshFailed(upstream: refresher.upstream.name, error: error, route: call.route.config.name)))
            }
        case .fail(let validator):
            call.dropConnection()
            front.record.log.reason = "\(validator) refused the response"
            end(.problem(.validatorFailed(status: outcome.status, on: call.route)))
        case .cutShort:
            guard case .failure(let error) = outcome else { return false }
            end(.cut(outcome: "cut-short-\(error.name)"))
        case .drain:
            // Read to its end, so its connection goes back to the pool instead of being closed and re-opened.
            front.record.log.upstreamStatus = nil
        case .retry(let next):
            front.record.tryDropped(now: now, context: &front.context)
            call.dropConnection()
            run(next)
        }
        return true
    }
}
