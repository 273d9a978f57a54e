import NIOCore
import Rewriter

/// A pass-through route's request body, sent upstream as it arrives.
extension ProxyHandler {
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
        setClientReading(false)
        let retry = RetryState<LoopInstant>(route: route, custom: shared.validators, method: request.method, replayable: false)
        startCall(Call(requestHead: head, request: consume request, route: route, requestID: client.requestID, streams: true), retry: retry)
    }

    func streamBody(_ buffer: ByteBuffer) { perform(machine.bodyPart(buffer)) }

    func streamEnd() { perform(machine.bodyEnded()) }

    /// The call is over while the client may still be sending its body: keep
    /// reading it (and drop it) so the connection's framing stays intact.
    func endStreaming() { perform(machine.bodyAbandoned()) }

    func perform(_ action: CallMachine.BodyAction) {
        switch action {
        case .none:
            return
        case .send(let buffer):
            guard let connection = call?.connection else { return }
            connection.sendBody(buffer)
            if !connection.isWritable { setClientReading(false) }
        case .sendEnd:
            call?.connection?.sendEnd()
        case .resumeClient:
            setClientReading(true)
        }
    }
}
