import NIOCore
import NIOHTTP1

/// Reads an upstream HTTP/1.1 connection's answers from its bytes and hands
/// them to the connection.
final class HTTP1UpstreamHandler: UpstreamConnectionHandler {
    typealias InboundIn = ByteBuffer

    let connection: UpstreamConnection
    private var received = ByteBuffer()

    init(connection: UpstreamConnection) { self.connection = connection }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        received.cumulate(unwrapInboundIn(data))
        do {
            while let part = try connection.decoder.next(&received) { connection.received(part) }
        } catch {
            received = ByteBuffer()
            connection.failed(.reset("upstream \(connection.upstream) sent a malformed answer: \(error)"), answerArrived: true)
        }
        if received.readableBytes == 0 { received = ByteBuffer() }
    }

    func channelInactive(context: ChannelHandlerContext) {
        // An answer read until close ends here; any other was cut short.
        do {
            if let end = try connection.decoder.inputClosed() { connection.received(end) }
        } catch {
            connection.failed(.reset("upstream \(connection.upstream) closed the connection mid-answer"))
        }
        connection.closed()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        connection.failed(.reset("\(error)"))
    }
}
