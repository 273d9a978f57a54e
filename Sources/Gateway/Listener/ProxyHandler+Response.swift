import NIOCore
import NIOHTTP1
import Rewriter

/// Forwarding a call upstream and streaming the answer back.
extension ProxyHandler {
    /// Lets a held answer through as it is: its head, what was held of the
    /// body, and from now on the rest as it arrives (too large to hold, or
    /// the validators accepted it).
    func releaseHeldAnswer() {
        guard let head = call?.heldHead, let body = call?.heldBody else { return }
        call?.heldHead = nil
        call?.heldBody = []
        writeHead(head)
        if !body.isEmpty {
            log.bytes += body.count
            client.write(.body(.byteBuffer(client.allocator.buffer(bytes: body))))
        }
    }

    func upstreamReadComplete() {
        if call?.responseHeadSent == true { client.flush() }
    }

    func upstreamWritabilityChanged(_ writable: Bool) {
        if writable, streaming?.connected == true { setClientReading(true) }
    }

    func forward() {
        applyCredentials()
        guard let call else { return }
        let pool = shared.pools.pool(for: client.eventLoop)
        // An idle pooled connection is used at once: no future, no callback.
        if let connection = pool.takeIdle(call.route.upstream.name) { return send(on: connection) }
        pool.acquire(call.route.upstream).whenComplete { [self] result in
            guard self.call != nil else {
                // The call ended (deadline, client gone) while we waited.
                if case .success(let connection) = result { connection.giveBack() }
                return
            }
            switch result {
            case .success(let connection):
                send(on: connection)
            case .failure(let error):
                let upstreamError = error as? UpstreamError ?? .connectFailure("\(error)")
                upstreamFailed(upstreamError, responseStarted: false)
            }
        }
    }

    func send(on connection: UpstreamConnection) {
        guard let call else { return }
        call.connection = connection
        call.route.metrics.tries.increment()
        armPerTryTimeout()
        guard var state = streaming else { return connection.send(call.request, delegate: self) }
        connection.sendHead(call.request, delegate: self)
        for buffer in state.pending { connection.sendBody(buffer) }
        state.pending = []
        state.connected = true
        if state.ended {
            connection.sendEnd()
            streaming = nil
        } else {
            streaming = state
            if connection.channel.isWritable { setClientReading(true) }
        }
    }

    func upstreamHead(_ upstreamHead: consuming HTTPResponseHead) {
        if call?.retry != nil,
            call?.route.config.validate.contains(where: \.readsBody) == true || shared.validators.contains(where: \.readsBody)
        {
            call?.heldHead = upstreamHead
            call?.heldBody = []
            return
        }
        if call?.retry != nil {
            let status = Int(upstreamHead.status.code)
            if decide(.response(status: status, headers: HeaderList(upstreamHead.headers), body: nil), upstreamStatus: status) { return }
        }
        writeHead(upstreamHead)
    }

    /// The answer's head goes to the client, edited in NIO's form (no
    /// conversion) and in place: handed over, not shared, it is not copied.
    func writeHead(_ upstreamHead: consuming HTTPResponseHead) {
        guard let call else { return }
        var head = upstreamHead
        head.headers.removeHopByHop()
        head.headers.replaceOrAdd(name: "X-Request-Id", value: call.requestID)
        call.route.config.responseHeaders.apply(to: &head.headers)
        if !call.keepAlive || exchange.quiescing { head.headers.replaceOrAdd(name: "Connection", value: "close") }
        call.responseHeadSent = true
        log.upstreamStatus = Int(head.status.code)
        client.write(.head(head))
    }

    func upstreamBody(_ buffer: ByteBuffer) {
        guard call != nil, call?.retryAfterDrain == nil else { return }
        if call?.heldHead != nil {
            call?.heldBody.append(contentsOf: buffer.readableBytesView)
            if call!.heldBody.count > shared.config.limits.maxBodyBytes { releaseHeldAnswer() }
            return
        }
        log.bytes += buffer.readableBytes
        // Flushed once per upstream read batch (upstreamReadComplete), not per part.
        client.write(.body(.byteBuffer(buffer)))
        if !client.isWritable { call?.connection?.setReading(false) }
    }

    func upstreamEnd() {
        if drained() { return }
        if let held = call?.heldHead, let body = call?.heldBody {
            let headers = HeaderList(held.headers)
            let status = Int(held.status.code)
            if decide(.response(status: status, headers: headers, body: body), upstreamStatus: status, answerComplete: true) { return }
            releaseHeldAnswer()
        }
        guard let call else { return }
        self.call = nil
        clearDeadline()
        endStreaming()
        record(status: log.upstreamStatus ?? 0, outcome: "ok")
        finishExchange(keepAlive: call.keepAlive)
    }

    func upstreamFailed(_ error: UpstreamError, responseStarted: Bool) {
        guard let call else { return }
        if drained() { return }
        // A reused keep-alive connection the upstream closed as we sent: the
        // request never reached it, so replay once on a fresh connection.
        if !responseStarted, decide(.failure(error), upstreamStatus: nil) { return }
        if !responseStarted, !call.replayed, error.name == "reset", let connection = call.connection, connection.uses > 1 {
            self.call?.replayed = true
            self.call?.connection = nil
            return forward()
        }
        self.call = nil
        clearDeadline()
        endStreaming()
        if call.responseHeadSent {
            // The answer is cut short: never pretend it ended.
            record(status: log.upstreamStatus ?? 0, outcome: "cut-short-\(error.name)")
            client.close()
            return
        }
        // A try that timed out is a gateway timeout, as nginx and Envoy answer it.
        let problem = Problem(status: error.name == "timeout" ? 504 : 502, code: "upstream-\(error.name)", title: "Upstream failed",
                              detail: "upstream \(call.route.upstream.name): \(error.detail)", route: call.route.config.name)
        answer(problem, to: call.requestHead, requestID: call.requestID)
    }
}
