import NIOCore
import Rewriter

/// A pass-through route's request body, sent upstream as it arrives,
/// reading paused whenever the upstream cannot take more.
extension ProxyHandler {
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
            if !connection.isWritable { client.setReading(false) }
        case .sendEnd:
            call?.connection?.sendEnd()
        case .resumeClient:
            client.setReading(true)
        }
    }
}
