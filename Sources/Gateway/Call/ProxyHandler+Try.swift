import NIOCore
import NIOHTTP1
import Rewriter

/// A try: an endpoint picked, a pooled connection taken (or waited for),
/// the request sent on it; its failure judged.
extension ProxyHandler {
    /// A try starts on an endpoint the upstream's balance picks (another
    /// than the last try's, when one may take it): an idle pooled connection
    /// at once (no future, no callback), else the pool calls back with the
    /// token of this try. Past `max_requests` or `max_pending` the call is
    /// answered 503 at once instead of waiting for its deadline.
    func acquire(_ token: CallMachine.Token) {
        guard let call else { return }
        call.takeCredentials()
        // The upstream's config is read in place: a copy would retain all of it.
        let route = call.route
        guard let state = shared.routeUpstreams[route.index] else { return answerEcho(call) }
        if let limit = route.upstream.maxRequests, state.inFlight.load(ordering: .relaxed) >= limit {
            return overloaded(call, limit: "max_requests (\(limit) in flight)")
        }
        let endpoint = state.pick(exclude: call.endpoint?.index, random: front.random.next())
        call.endpoint = endpoint
        if let traceparent = front.record.tryStarted(method: call.request.method, upstream: route.upstream.name, endpoint: endpoint.url, now: now,
                                                     random: &front.random, context: &front.context) {
            call.request.headers.set("traceparent", traceparent)
        }
        // An idle pooled connection is used at once: no waiter closure to allocate.
        if let connection = front.context.pool.takeIdle(endpoint, now: now) {
            if !connectionReady(connection, token) { connection.giveBack() }
            return
        }
        if let limit = route.upstream.maxPending, state.pending.load(ordering: .relaxed) >= limit {
            return overloaded(call, limit: "max_pending (\(limit) waiting for a connection)")
        }
        call.enterPending(state)
        let acquisition = front.context.pool.acquire(route.upstream, endpoint: endpoint) { [self, call] result in
            call.leavePending()
            switch result {
            case .success(let connection):
                return connectionReady(connection, token)
            case .failure(let error):
                // A connect that failed was a try too.
                guard machine.connectFailed(token) else { return false }
                self.call?.waiter = nil
                front.record.log.tries = machine.tries
                upstreamFailed(error as? UpstreamError ?? .connectFailure("\(error)"), progress: .unsent)
                return true
            }
        }
        switch acquisition {
        case .ready(let connection):
            call.leavePending()
            if !connectionReady(connection, token) { connection.giveBack() }
        case .waiting(let waiter):
            if machine.isCurrent(token) { call.waiter = waiter }
        }
    }

    /// A circuit breaker is open: 503 with Retry-After, the upstream untouched.
    func overloaded(_ call: Call, limit: String) {
        fail(.overloaded(upstream: call.route.upstream.name, limit: limit, route: call.route.config.name), call, extraHeaders: ["Retry-After": "1"],
             close: call.streams)
    }

    /// The current try's outcome, told once to its endpoint's outlier
    /// detection; `failure`: what made it fail, nil when it did not.
    func judgeTry(_ failure: OutlierConfig.Failure?) {
        guard machine.judge(), let endpoint = call?.endpoint else { return }
        endpoint.upstream.tryEnded(endpoint, failure: failure)
    }

    /// Whether the call took the connection (false: its try is over, the
    /// connection goes to someone else).
    func connectionReady(_ connection: any UpstreamConnection, _ token: CallMachine.Token) -> Bool {
        guard case .send(_, let perTryTimeout, let streamed) = machine.connectionReady(token), let call else { return false }
        call.waiter = nil
        call.connection = connection
        call.endpoint = connection.endpoint
        call.route.metrics.tries?.increment()
        front.record.trySent(tries: machine.tries, to: connection.peerAddress, now: now)
        call.perTryTimer?.cancel()
        if let perTryTimeout {
            call.perTryTimer = client.eventLoop.assumeIsolated().scheduleTask(in: perTryTimeout.timeAmount) { [self] in
                run(machine.perTryTimerFired(token))
            }
        }
        guard let streamed else {
            connection.send(call.request, delegate: self)
            return true
        }
        connection.sendHead(call.request, delegate: self)
        // The connection may have failed inside that write, ending the try.
        guard machine.isCurrent(token) else { return true }
        for buffer in streamed.pending { connection.sendBody(buffer) }
        if streamed.end {
            connection.sendEnd()
        } else if connection.isWritable {
            client.setReading(true)
        }
        return true
    }

    func upstreamFailed(_ error: UpstreamError, progress: TryProgress) {
        guard let call else { return }
        front.record.tryFailed(error, now: now, context: &front.context)
        call.connection = nil
        // A drained refusal was judged already: this is a no-op for it.
        judgeTry(OutlierConfig.Failure(error.kind))
        switch machine.tryFailed(error.kind, progress: progress) {
        case .retry(let next):
            return run(next)
        case .replay(let next):
            logTry(.failure(error), .retry(after: .zero, reason: "unsent"))
            return run(next)
        case .judge:
            if decide(.failure(error), upstreamStatus: nil) { return }
        case .cutShort:
            return cutShort("cut-short-\(error.name)")
        case .fail:
            break
        }
        fail(.upstreamFailed(error, upstream: call.route.upstream.name, route: call.route.config.name), call)
    }
}
