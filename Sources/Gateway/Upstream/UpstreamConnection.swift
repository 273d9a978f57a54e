import NIOCore
import NIOHTTP1
import NIOHTTP2

/// What receives an upstream's answer, part by part, on the connection's
/// event loop (the downstream call's own loop).
protocol UpstreamResponseDelegate: AnyObject {
    func upstreamHead(_ head: HTTPResponseHead)
    func upstreamBody(_ buffer: ByteBuffer)
    func upstreamEnd()
    /// `responseStarted`: whether any part of the answer had arrived.
    func upstreamFailed(_ error: UpstreamError, responseStarted: Bool)
    /// The upstream socket can take more (or no more) of a streamed request body.
    func upstreamWritabilityChanged(_ writable: Bool)
    /// The end of one read batch: the time to flush what was written downstream.
    func upstreamReadComplete()
}

/// One keep-alive HTTP/1.1 connection to an upstream, owned by a pool on
/// one event loop — or one HTTP/2 stream on a shared upstream connection
/// (`isStream`), which carries a single request and is never pooled. Not
/// Sendable on purpose: it lives on its loop only.
final class UpstreamConnection {
    let channel: Channel
    let upstream: String
    let isStream: Bool
    /// How many requests this connection has carried (a reused connection may
    /// have been closed by the upstream just as we sent: safe to replay once).
    private(set) var uses = 0
    fileprivate var delegate: UpstreamResponseDelegate?
    fileprivate var responseStarted = false
    fileprivate var keepAlive = true
    /// False while a streamed request body is still being sent: an answer that
    /// ends before it leaves the connection's framing unfinished, never reusable.
    private var requestComplete = true
    weak var pool: UpstreamPool?
    /// Reading paused because the client cannot take the answer as fast.
    private var readingPaused = false

    init(channel: Channel, upstream: String, isStream: Bool = false) {
        self.channel = channel
        self.upstream = upstream
        self.isStream = isStream
    }

    var isBusy: Bool { delegate != nil }

    /// Sends the whole request (head, buffered body, end).
    func send(_ request: UpstreamRequest, delegate: UpstreamResponseDelegate) {
        sendHead(request, delegate: delegate)
        if let body = request.body, !body.isEmpty { sendBody(channel.allocator.buffer(bytes: body)) }
        sendEnd()
    }

    /// Starts a request whose body follows part by part (`sendBody`, `sendEnd`).
    func sendHead(_ request: UpstreamRequest, delegate: UpstreamResponseDelegate) {
        self.delegate = delegate
        uses += 1
        responseStarted = false
        requestComplete = false
        keepAlive = !request.headers.values("Connection").contains { $0.lowercased() == "close" }
        let head = HTTPRequestHead(version: .http1_1, method: HTTPMethod(rawValue: request.method), uri: request.target,
                                   headers: request.headers.httpHeaders)
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
    }

    func sendBody(_ buffer: ByteBuffer) {
        channel.writeAndFlush(HTTPClientRequestPart.body(.byteBuffer(buffer)), promise: nil)
    }

    func sendEnd() {
        requestComplete = true
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
    }

    /// Backpressure from a slow client: stop (or resume) reading the answer.
    func setReading(_ on: Bool) {
        guard readingPaused == on else { return }
        readingPaused = !on
        channel.setOption(ChannelOptions.autoRead, value: on).whenComplete { _ in }
    }

    /// The call ended before the connection was used: pooled connections go
    /// back to the pool, a stream is closed.
    func giveBack() {
        if isStream { channel.close(promise: nil) } else { pool?.release(self) }
    }

    /// The caller gives up (client gone, deadline passed): the connection is
    /// in an unknown state and is closed, not reused.
    func abandon() {
        delegate = nil
        channel.close(promise: nil)
    }

    fileprivate func finish() {
        delegate = nil
        if isStream {
            // The stream closes by itself once both sides ended; reset it if ours had not.
            if !requestComplete { channel.close(promise: nil) }
        } else if keepAlive, requestComplete, channel.isActive {
            setReading(true)
            pool?.release(self)
        } else {
            channel.close(promise: nil)
        }
    }
}

/// Turns the upstream channel's response parts into delegate calls. Holds its
/// connection strongly: the pipeline is torn down when the channel closes,
/// which ends the cycle.
final class UpstreamResponseHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    let connection: UpstreamConnection

    init(connection: UpstreamConnection) { self.connection = connection }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let delegate = connection.delegate else { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            // 1xx interim answers are not forwarded; the final answer follows.
            if head.status.code < 200 && head.status.code != 101 { return }
            connection.responseStarted = true
            if !head.isKeepAlive { connection.keepAlive = false }
            delegate.upstreamHead(head)
        case .body(let buffer):
            delegate.upstreamBody(buffer)
        case .end:
            connection.finish()
            delegate.upstreamEnd()
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        connection.delegate?.upstreamReadComplete()
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        connection.delegate?.upstreamWritabilityChanged(context.channel.isWritable)
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !connection.isStream { connection.pool?.closed(connection) }
        if let delegate = connection.delegate {
            connection.delegate = nil
            delegate.upstreamFailed(.reset("the upstream closed the connection"), responseStarted: connection.responseStarted)
        }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if let delegate = connection.delegate {
            connection.delegate = nil
            // REFUSED_STREAM: the upstream did not process the request (RFC 9113 section 8.7).
            let failure: UpstreamError = if let closed = error as? NIOHTTP2Errors.StreamClosed, closed.errorCode == .refusedStream {
                .refusedStream("upstream \(connection.upstream) refused the stream")
            } else {
                .reset("\(error)")
            }
            delegate.upstreamFailed(failure, responseStarted: connection.responseStarted)
        }
        context.close(promise: nil)
    }
}
