import NIOCore
import NIOHTTP1
import Rewriter

/// Forwarding a call upstream and streaming the response back.
extension ProxyHandler {
    /// Lets a held answer through as it is: its head, what was held of the
    /// body, and from now on the rest as it arrives (too large to hold, or
    /// the validators accepted it).
    func releaseHeldResponse(_ head: ResponseHead, body: [UInt8], whole: Bool) {
        var head = head, body = body
        // The route's filters read the whole body (not one too large to hold: it streams past them).
        let filtersBody = whole && call?.filters != nil
        if filtersBody, let call {
            prepare(&head, call)
            var held: [UInt8]? = body
            if let answer = filterResponse(&head, body: &held, call) { return replaceResponse(with: answer, call) }
            body = held ?? body
        }
        guard writeHead(head, prepared: filtersBody) else { return }
        if !body.isEmpty {
            front.record.log.bytes += body.count
            client.write(.body(client.allocator.buffer(bytes: body)))
        }
    }

    func upstreamReadComplete() {
        if machine.responseForwarded { client.flush() }
    }

    func upstreamWritabilityChanged(_ writable: Bool) {
        if writable, machine.bodyConnected { client.setReading(true) }
    }

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
        if front.record.spans != nil {
            let (traceparent, ended) = front.record.spans!.tryStarted(method: call.request.method, upstream: route.upstream.name, endpoint: endpoint.url,
                                                         now: now, random: &front.random)
            front.context.send(ended)
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
        front.record.log.tries = machine.tries
        front.record.log.sentAt = now
        front.record.log.upstreamAddress = connection.peerAddress
        front.record.spans?.tryConnected(to: connection.peerAddress)
        front.record.log.upstreamStatus = nil
        front.record.log.firstByte = nil
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

    /// The upstream switched protocols: the 101 goes to the client with its
    /// Upgrade, and both connections become one tunnel until either closes
    /// (then the call's access line: bytes each way, duration).
    func upstreamSwitched(_ head: ResponseHead, connection: any UpstreamConnection) {
        guard let call = endCall(), let clientEnd = client as? any TunnelEnd, let upstreamEnd = connection as? any TunnelEnd else {
            connection.close()
            return client.close()
        }
        front.record.log.upstreamStatus = 101
        if let sentAt = front.record.log.sentAt { front.record.log.firstByte = now - sentAt }
        client.write(.head(head.switchedForClient(asked: call.request.headers["Upgrade"], requestID: call.requestID,
                                                  rules: call.route.config.responseHeaders)))
        client.flush()
        let tunnel = Tunnel(client: clientEnd, upstream: upstreamEnd,
                            idleTimeout: shared.config.limits.idleTimeout.timeAmount, on: client.eventLoop) { [self] tunnel in
            front.record.log.bytes = tunnel.bytesFromUpstream
            front.record.log.requestBytes = tunnel.bytesFromClient
            front.writeRecord(status: 101, outcome: "tunnel-closed")
        }
        guard connection.startTunnel(tunnel), client.startTunnel(tunnel) else { return tunnel.close() }
    }

    func upstreamHead(_ upstreamHead: consuming ResponseHead) {
        // Logged whatever the validators make of it.
        let status = Int(upstreamHead.status.code)
        front.record.log.upstreamStatus = status
        front.record.spans?.tryAnswered(status: status)
        if let sentAt = front.record.log.sentAt { front.record.log.firstByte = now - sentAt }
        // The call read once: each `call?.` retains and releases it.
        guard let call else { return }
        switch machine.responseHead(upstreamHead, holdsBody: call.route.readsResponseBodies || shared.validatorsReadBodies) {
        case .hold:
            return
        case .judge:
            if decide(.response(status: status, headers: upstreamHead.headers, body: nil), upstreamStatus: status) { return }
        case .forward:
            judgeTry(status >= 500 ? .status5xx : nil)
        }
        writeHead(consume upstreamHead)
    }

    /// The response's head goes to the client, edited in place: handed over,
    /// not shared, it is not copied. Returns false when a filter answered
    /// instead (the upstream's answer is dropped with its connection).
    /// `prepared`: edited for the client and through the route's filters already (with its body).
    @discardableResult
    func writeHead(_ upstreamHead: consuming ResponseHead, prepared: Bool = false) -> Bool {
        guard let call else { return false }
        // Moved, not copied: a second reference would make its first edit copy every field.
        var head = consume upstreamHead
        if !prepared {
            prepare(&head, call)
            var none: [UInt8]?
            if call.filters != nil, let answer = filterResponse(&head, body: &none, call) {
                replaceResponse(with: answer, call)
                return false
            }
        }
        machine.responseHeadForwarded()
        call.perTryTimer?.cancel()
        client.write(.head(head))
        return true
    }

    private func prepare(_ head: inout ResponseHead, _ call: Call) {
        head.prepareForClient(requestID: call.requestID, rules: call.route.config.responseHeaders, close: !call.keepAlive || front.exchange.quiescing)
    }

    /// A filter answered instead of the upstream: its connection, which may
    /// still carry the rest of the upstream's answer, is dropped.
    private func replaceResponse(with answer: OwnAnswer, _ call: Call) {
        call.connection?.abandon()
        self.answer(answer)
    }

    /// The built-in echo answers a call that went through the route's
    /// filters: the request as they left it, one try.
    private func answerEcho(_ call: Call) {
        var answer = OwnAnswer(echoing: call.request, requestID: call.requestID, rules: call.route.config.responseHeaders,
                               to: call.requestHead, close: front.exchange.quiescing)
        var body: [UInt8]? = answer.body
        let replaced = call.filters == nil ? nil : filterResponse(&answer.head, body: &body, call)
        answer.body = body ?? answer.body
        endCall()
        front.answerEcho(replaced ?? answer, route: call.route)
    }

    func upstreamBody(_ buffer: ByteBuffer) {
        guard let call, !machine.isDraining else { return }
        if machine.isHolding {
            if let held = machine.heldBody(buffer, limit: shared.config.limits.maxResponseBodyBytes) {
                releaseHeldResponse(held.head, body: held.body, whole: false)
            }
            return
        }
        front.record.log.bytes += buffer.readableBytes
        // Flushed once per upstream read batch (upstreamReadComplete), not per part.
        client.write(.body(buffer))
        if !client.isWritable { call.connection?.setReading(false) }
    }

    func upstreamEnd() { atEvent { completeResponse() } }

    private func completeResponse() {
        switch machine.responseEnded() {
        case .retry(let next):
            call?.connection = nil
            return run(next)
        case .judgeHeld(let head, let body):
            let status = Int(head.status.code)
            if decide(.response(status: status, headers: head.headers, body: body), upstreamStatus: status, responseComplete: true) { return }
            releaseHeldResponse(head, body: body, whole: true)
        case .finish:
            break
        }
        guard let call = endCall() else { return }
        endStreaming()
        front.writeRecord(status: front.record.log.upstreamStatus ?? 0, outcome: "ok")
        front.finishExchange(keepAlive: call.keepAlive)
    }

    func upstreamFailed(_ error: UpstreamError, progress: TryProgress) {
        guard let call else { return }
        front.record.log.reason = error.description
        front.context.send(front.record.spans?.tryFailed(error.name, now: now))
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
