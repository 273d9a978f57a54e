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
            if judged(status: status, headers: upstreamHead.headers, body: nil) { return }
        case .forward:
            judgeTry(status >= 500 ? .status5xx : nil)
        }
        forward(consume upstreamHead)
    }

    /// The answer goes to the client (see `ClientExchange.prepare`), or the
    /// answer a filter made instead, the upstream's dropped with its connection.
    func forward(_ upstreamHead: consuming ResponseHead, held: [UInt8] = [], whole: Bool = false) {
        guard let call else { return }
        // Moved, not copied: a second reference would make its first edit copy every field.
        var head = consume upstreamHead
        var body = held
        if let answer = front.prepare(&head, body: &body, whole: whole, for: call) {
            call.dropConnection()
            return end(.answer(answer))
        }
        machine.responseHeadForwarded()
        call.perTryTimer?.cancel()
        front.writeHead(consume head, body: body)
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

    func upstreamEnd() {
        front.atEvent {
            // Its connection finished the response and went back to its pool.
            call?.connection = nil
            run(machine.responseEnded())
        }
    }
}
