import NIOCore
import NIOHTTP1
import Rewriter

/// The try's answer: held for the validators and filters, or streamed back
/// to the client part by part; a 101 joins both connections into a tunnel.
extension ProxyHandler {
    func upstreamReadComplete() {
        if machine.responseForwarded { client.flush() }
    }

    func upstreamWritabilityChanged(_ writable: Bool) {
        if writable, machine.bodyConnected { client.setReading(true) }
    }

    /// The upstream switched protocols: the 101 goes to the client with its
    /// Upgrade, and both connections become one tunnel until either closes
    /// (then the call's access line: bytes each way, duration).
    func upstreamSwitched(_ head: ResponseHead, connection: any UpstreamConnection) {
        guard let call = endCall(), let clientEnd = client as? any TunnelEnd, let upstreamEnd = connection as? any TunnelEnd else {
            connection.close()
            return client.close()
        }
        front.record.tryAnswered(status: 101, now: now)
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
        front.record.tryAnswered(status: status, now: now)
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
        forward(consume upstreamHead)
    }

    /// The answer's head goes to the client, edited in place (handed over,
    /// not shared, it is not copied), then what was held of its body; the
    /// rest streams after it. The route's filters see the head, and the
    /// body when it is `whole` (one too large to hold streams past them);
    /// when a filter answers instead, the upstream's answer is dropped with
    /// its connection.
    func forward(_ upstreamHead: consuming ResponseHead, held: [UInt8] = [], whole: Bool = false) {
        guard let call else { return }
        // Moved, not copied: a second reference would make its first edit copy every field.
        var head = consume upstreamHead
        head.prepareForClient(requestID: call.requestID, rules: call.route.config.responseHeaders, close: !call.keepAlive || front.exchange.quiescing)
        var body = held
        if call.filters != nil {
            var seen: [UInt8]? = whole ? held : nil
            if let answer = filterResponse(&head, body: &seen, call) {
                call.connection?.abandon()
                return self.answer(answer)
            }
            if let seen { body = seen }
        }
        machine.responseHeadForwarded()
        call.perTryTimer?.cancel()
        client.write(.head(head))
        if !body.isEmpty {
            front.record.log.bytes += body.count
            client.write(.body(client.allocator.buffer(bytes: body)))
        }
    }

    /// The built-in echo answers a call that went through the route's
    /// filters: the request as they left it, one try.
    func answerEcho(_ call: Call) {
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
                forward(held.head, held: held.body)
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
            forward(head, held: body, whole: true)
        case .finish:
            break
        }
        guard let call = endCall() else { return }
        endStreaming()
        front.writeRecord(status: front.record.log.upstreamStatus ?? 0, outcome: "ok")
        front.finishExchange(keepAlive: call.keepAlive)
    }

    /// The answer through the route's filters (see `FilterRun.response`):
    /// the answer that replaces it, when a filter made one, logged with why
    /// (as is a failure `fail_open` let through).
    func filterResponse(_ head: inout ResponseHead, body: inout [UInt8]?, _ call: Call) -> OwnAnswer? {
        guard let filters = call.filters else { return nil }
        let replaced = filters.response(&head, body: &body, for: call, traceID: front.record.log.traceHex)
        if let reason = replaced?.reason ?? filters.failureReason { front.record.log.reason = reason }
        return replaced?.0
    }
}
