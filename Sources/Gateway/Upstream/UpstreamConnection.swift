import NIOCore
import NIOHTTP1
import NIOHTTP2

/// What receives an upstream's answer, part by part, on the connection's
/// event loop (the downstream call's own loop).
protocol UpstreamResponseDelegate: AnyObject {
    /// Consumed: the call edits the head it was handed in place.
    func upstreamHead(_ head: consuming HTTPResponseHead)
    func upstreamBody(_ buffer: ByteBuffer)
    func upstreamEnd()
    /// `progress`: how far the try got before it failed.
    func upstreamFailed(_ error: UpstreamError, progress: TryProgress)
    /// The upstream socket can take more (or no more) of a streamed request body.
    func upstreamWritabilityChanged(_ writable: Bool)
    /// The end of one read batch: the time to flush what was written downstream.
    func upstreamReadComplete()
}

/// How far a failed try got: what decides whether it may be sent again.
enum TryProgress: Sendable {
    /// Provably no byte of the request reached the upstream: the connection
    /// was closed before it was written, or closed by the failing write itself.
    case unsent
    /// The request went out (wholly or in part); no response yet.
    case sent
    /// A response (or bytes of a malformed one) arrived.
    case responseStarted
}

/// One keep-alive HTTP/1.1 connection to an upstream, owned by a pool on
/// one event loop — or one HTTP/2 stream on a shared upstream connection
/// (`isStream`), which carries a single request and is never pooled. An
/// HTTP/1.1 connection writes requests as bytes (HTTP1UpstreamHandler reads
/// the answers); a stream writes NIO's request parts. Not Sendable on
/// purpose: it lives on its loop only.
final class UpstreamConnection {
    let channel: Channel
    let upstream: String
    let isStream: Bool
    private var delegate: UpstreamResponseDelegate?
    private(set) var responseStarted = false
    /// The request is being written (one write): a close that happens
    /// inside that write was caused by it failing, before any byte went out.
    private var writing = false
    /// Some of the request was handed to the socket.
    private var requestWritten = false
    private var keepAlive = true
    /// False while a streamed request body is still being sent: an answer that
    /// ends before it leaves the connection's framing unfinished, never reusable.
    private var requestComplete = true
    /// The streamed request body goes in chunks (it has no Content-Length).
    private var chunked = false
    weak var pool: UpstreamPool?
    /// Reading paused because the client cannot take the answer as fast.
    private var readingPaused = false
    private var spare = ReusableBuffer()
    /// Reads answers on an HTTP/1.1 connection.
    var decoder = HTTP1ResponseDecoder(maxHeadBytes: UpstreamConnection.maxHeadBytes)

    /// An answer's head is read up to this size (NIO's default limit).
    static let maxHeadBytes = 80 * 1024

    init(channel: Channel, upstream: String, isStream: Bool = false) {
        self.channel = channel
        self.upstream = upstream
        self.isStream = isStream
    }

    var isBusy: Bool { delegate != nil }

    /// Sends the whole request (head, buffered body, end): on HTTP/1.1 one write.
    func send(_ request: UpstreamRequest, delegate: UpstreamResponseDelegate) {
        guard !isStream else {
            sendHead(request, delegate: delegate)
            if let body = request.body, !body.isEmpty { sendBody(channel.allocator.buffer(bytes: body)) }
            return sendEnd()
        }
        var out = start(request, delegate: delegate, extra: request.body?.count ?? 0)
        if let body = request.body { out.writeBytes(body) }
        requestComplete = true
        guard channel.isActive else { return closed() }
        // NIO reports a failed write by closing the channel inside this call.
        writing = true
        channel.writeAndFlush(out, promise: nil)
        writing = false
        requestWritten = true
        spare.keep(out)
    }

    /// Starts a request whose body follows part by part (`sendBody`, `sendEnd`).
    func sendHead(_ request: UpstreamRequest, delegate: UpstreamResponseDelegate) {
        guard isStream else {
            let out = start(request, delegate: delegate, extra: 0)
            guard channel.isActive else { return closed() }
            requestWritten = true
            channel.write(out, promise: nil)
            return spare.keep(out)
        }
        begin(request, delegate: delegate)
        let head = HTTPRequestHead(version: .http1_1, method: HTTPMethod(rawValue: request.method), uri: request.target,
                                   headers: request.headers.httpHeaders)
        requestWritten = true
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
    }

    private func begin(_ request: UpstreamRequest, delegate: UpstreamResponseDelegate) {
        self.delegate = delegate
        responseStarted = false
        requestWritten = false
        requestComplete = false
        keepAlive = !request.headers.values("Connection").contains { $0.lowercased() == "close" }
    }

    /// The HTTP/1.1 request head as bytes, with room for `extra` more.
    private func start(_ request: UpstreamRequest, delegate: UpstreamResponseDelegate, extra: Int) -> ByteBuffer {
        begin(request, delegate: delegate)
        chunked = request.headers.contains("Transfer-Encoding")
        decoder.expect(method: HTTPMethod(rawValue: request.method))
        var out = spare.take(channel.allocator, capacity: 512 + extra)
        out.writeRequestHead(method: request.method, target: request.target, headers: request.headers)
        return out
    }

    func sendBody(_ buffer: ByteBuffer) {
        if isStream { return channel.writeAndFlush(HTTPClientRequestPart.body(.byteBuffer(buffer)), promise: nil) }
        guard chunked else { return channel.writeAndFlush(buffer, promise: nil) }
        guard buffer.readableBytes > 0 else { return }
        var frame = channel.allocator.buffer(capacity: 24)
        frame.writeChunkSize(buffer.readableBytes)
        channel.write(frame, promise: nil)
        channel.write(buffer, promise: nil)
        channel.writeAndFlush(channel.allocator.buffer(staticString: "\r\n"), promise: nil)
    }

    func sendEnd() {
        requestComplete = true
        if isStream { return channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil) }
        if chunked { return channel.writeAndFlush(channel.allocator.buffer(staticString: "0\r\n\r\n"), promise: nil) }
        channel.flush()
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

    /// A part of the answer arrived.
    func received(_ part: consuming HTTPClientResponsePart) {
        guard let delegate else { return }
        switch consume part {
        case .head(let head):
            // The request asked for no upgrade (Upgrade is hop-by-hop): a tunnel is not forwarded.
            if head.status.code == 101 {
                return failed(.reset("upstream \(upstream) switched protocols, which is not forwarded"), answerArrived: true)
            }
            // 1xx interim answers are not forwarded; the final answer follows.
            if head.status.code < 200 { return }
            responseStarted = true
            delegate.upstreamHead(head)
        case .body(let buffer):
            delegate.upstreamBody(buffer)
        case .end:
            if !isStream && decoder.mustClose { keepAlive = false }
            finish()
            delegate.upstreamEnd()
        }
    }

    func readComplete() { delegate?.upstreamReadComplete() }

    func writabilityChanged() { delegate?.upstreamWritabilityChanged(channel.isWritable) }

    private var progress: TryProgress {
        if responseStarted { return .responseStarted }
        return requestWritten && !writing ? .sent : .unsent
    }

    /// The call in flight, if any, failed: the connection is closed.
    /// `answerArrived`: bytes of an answer came (a malformed one), so the
    /// upstream saw the request.
    func failed(_ error: UpstreamError, answerArrived: Bool = false) {
        if let delegate {
            self.delegate = nil
            delegate.upstreamFailed(error, progress: answerArrived ? .responseStarted : progress)
        }
        channel.close(promise: nil)
    }

    /// The channel closed (or was found closed when a request was to go out).
    func closed() {
        if !isStream, !wasClosed { pool?.closed(self) }
        wasClosed = true
        if let delegate {
            self.delegate = nil
            delegate.upstreamFailed(.reset("the upstream closed the connection"), progress: progress)
        }
    }

    /// The pool was told of the close already.
    private var wasClosed = false

    private func finish() {
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

/// A channel handler that feeds an UpstreamConnection (HTTP/1.1 bytes or
/// HTTP/2 stream parts): the end of a read batch and writability changes
/// pass straight to it. Holds its connection strongly: the pipeline is torn
/// down when the channel closes, which ends the cycle.
protocol UpstreamConnectionHandler: ChannelInboundHandler {
    var connection: UpstreamConnection { get }
}

extension UpstreamConnectionHandler {
    func channelReadComplete(context: ChannelHandlerContext) {
        connection.readComplete()
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        connection.writabilityChanged()
        context.fireChannelWritabilityChanged()
    }
}

/// Turns an upstream HTTP/2 stream's answer parts into calls on its connection.
final class UpstreamStreamHandler: UpstreamConnectionHandler {
    typealias InboundIn = HTTPClientResponsePart

    let connection: UpstreamConnection

    init(connection: UpstreamConnection) { self.connection = connection }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        connection.received(unwrapInboundIn(data))
    }

    func channelInactive(context: ChannelHandlerContext) {
        connection.closed()
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
