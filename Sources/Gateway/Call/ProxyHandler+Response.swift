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

    /// The upstream switched protocols: the call becomes a tunnel.
    func upstreamSwitched(_ head: ResponseHead, connection: any UpstreamConnection) {
        guard let call = endCall() else {
            connection.close()
            return client.close()
        }
        front.openTunnel(head, for: call, to: connection)
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
            if let answer = front.filterResponse(&head, body: &seen, call) {
                call.connection?.abandon()
                return end(.answer(answer))
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

    func upstreamEnd() { front.atEvent { completeResponse() } }

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
        end(.complete)
    }
}
