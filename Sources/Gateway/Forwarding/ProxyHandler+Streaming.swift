import NIOCore
import Rewriter

/// A pass-through route's request body, sent upstream as it arrives.
extension ProxyHandler {
    struct Streaming {
        /// Body parts read before the upstream connection was ready.
        var pending: [ByteBuffer] = []
        var ended = false
        var connected = false
    }

    /// The body goes upstream as it arrives: the client's framing (length or
    /// chunked) is kept, and reading pauses whenever the upstream cannot take more.
    func startStreaming(_ head: RequestHead, _ admitted: CallAdmission.Admitted, framing: RequestFraming) {
        let client = clientInfo(head.headers)
        let route = admitted.match.route
        var request: UpstreamRequest
        do {
            // One canonical length goes upstream, whatever spelling or
            // repetition the client's had (`05`, `5, 5`, two fields).
            request = try CallAdmission.upstreamRequest(admitted, method: head.method.rawValue, target: head.uri, headers: head.headers,
                                                        body: [], client: client, streamed: framing)
        } catch {
            return respond(error, to: head, requestID: client.requestID, close: true)
        }
        streaming = Streaming()
        setClientReading(false)
        let retry = retryState(route, method: request.method, replayable: false)
        startCall(Call(requestHead: head, request: consume request, route: route, requestID: client.requestID, retry: retry, streams: true))
    }

    func streamBody(_ buffer: ByteBuffer) {
        guard var state = streaming else { return }
        if state.connected, let connection = call?.connection {
            connection.sendBody(buffer)
            if !connection.isWritable { setClientReading(false) }
        } else if call != nil {
            state.pending.append(buffer)
            streaming = state
        }
    }

    func streamEnd() {
        guard var state = streaming else { return }
        state.ended = true
        streaming = state
        if state.connected, let connection = call?.connection {
            connection.sendEnd()
            streaming = nil
        } else if call == nil {
            // The call already ended (answered early or failed): nothing to send.
            streaming = nil
            setClientReading(true)
        }
    }

    /// The call is over while the client may still be sending its body: keep
    /// reading it (and drop it) so the connection's framing stays intact.
    func endStreaming() {
        guard var state = streaming else { return }
        state.pending = []
        state.connected = false
        streaming = state.ended ? nil : state
        setClientReading(true)
    }
}
