import NIOCore
import NIOHTTP1
import NIOHTTP2
import Rewriter

/// One stream of a multiplexed HTTP/2 upstream connection: it carries a
/// single request, written as NIO's request parts, and is never pooled.
final class HTTP2UpstreamStream: UpstreamConnection {
    let channel: Channel
    let upstream: String
    var exchange = UpstreamExchange()
    private(set) lazy var peerAddress = channel.remoteAddress.map(\.hostAndPort) ?? upstream
    let readGate = ReadGate()

    init(channel: Channel, upstream: String) {
        self.channel = channel
        self.upstream = upstream
    }

    func send(_ request: UpstreamRequest, delegate: UpstreamResponseDelegate) {
        sendHead(request, delegate: delegate)
        if let body = request.body, !body.isEmpty { sendBody(channel.allocator.buffer(bytes: body)) }
        sendEnd()
    }

    func sendHead(_ request: UpstreamRequest, delegate: UpstreamResponseDelegate) {
        exchange.begin(delegate)
        var headers = request.headers.httpHeaders
        // HTTP/2 frames the body itself; a known length is still stated (RFC 9113 §8.1.1).
        if case .length(let length) = request.framing { headers.add(name: "content-length", value: String(length)) }
        let head = HTTPRequestHead(version: .http1_1, method: HTTPMethod(rawValue: request.method), uri: request.target, headers: headers)
        exchange.requestWritten = true
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
    }

    func sendBody(_ buffer: ByteBuffer) {
        channel.writeAndFlush(HTTPClientRequestPart.body(.byteBuffer(buffer)), promise: nil)
    }

    func sendEnd() {
        exchange.requestComplete = true
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
    }

    func giveBack() { channel.close(promise: nil) }

    /// The stream closes by itself once both sides ended; it is reset if ours had not.
    func responseEnded() {
        if !exchange.requestComplete { channel.close(promise: nil) }
    }
}

/// Turns an upstream HTTP/2 stream's response parts into calls on its stream.
final class UpstreamStreamHandler: UpstreamConnectionHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = HTTPClientRequestPart

    let connection: HTTP2UpstreamStream

    init(connection: HTTP2UpstreamStream) { self.connection = connection }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // swift-nio-http2's HTTP/1 codec speaks NIO's head type: converted here, at its edge.
        switch unwrapInboundIn(data) {
        case .head(let head):
            connection.received(.head(ResponseHead(version: head.version, status: head.status, headers: HeaderList(head.headers))))
        case .body(let buffer):
            connection.received(.body(buffer))
        case .end(let trailers):
            connection.received(.end(trailers))
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        connection.exchangeClosed()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // REFUSED_STREAM: the upstream did not process the request (RFC 9113 section 8.7).
        if let closed = error as? NIOHTTP2Errors.StreamClosed, closed.errorCode == .refusedStream {
            connection.failed(.refusedStream("upstream \(connection.upstream) refused the stream"))
        } else {
            connection.failed(.reset("\(error)"))
        }
    }
}
