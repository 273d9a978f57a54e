import CNGHTTP2
import NIOCore

/// One multiplexed HTTP/2 connection to an upstream (h2c by prior
/// knowledge, or h2 over TLS), on libnghttp2's client session: each call's
/// request is a stream (`HTTP2UpstreamStream`); frames go out in one write
/// per read batch or event-loop tick. Lives on its event loop only.
final class HTTP2UpstreamSession: ChannelInboundHandler, NGHTTP2SessionDelegate {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let upstream: String
    /// `:scheme` of every request: http or https, as the upstream's URL.
    let scheme: String
    private var session: NGHTTP2Session!
    private var context: ChannelHandlerContext?
    private var streams: [Int32: HTTP2UpstreamStream] = [:]
    /// The upstream sent GOAWAY or the connection is gone: calls open a new connection.
    private(set) var acceptsStreams = true
    private(set) lazy var peerAddress = context?.channel.remoteAddress.map(\.hostAndPort) ?? upstream
    var allocator: ByteBufferAllocator { context?.channel.allocator ?? ByteBufferAllocator() }

    let endpoint: Endpoint

    init(upstream: String, scheme: String, endpoint: Endpoint) {
        self.upstream = upstream
        self.scheme = scheme
        self.endpoint = endpoint
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        session = NGHTTP2Session(server: false, delegate: self)
        // An upstream pushes nothing to a gateway.
        session.submitSettings([(NGHTTP2_SETTINGS_ENABLE_PUSH, 0)])
        session.setLocalWindow(stream: 0, size: HTTP2ServerHandler.connectionWindow)
        if context.channel.isActive { sendNow() }
    }

    func channelActive(context: ChannelHandlerContext) {
        sendNow()
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        closeAll()
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        closeAll()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !session.closing else { return }
        if session.receive(unwrapInboundIn(data)) < 0 {
            session.goAway(lastStream: 0, code: NGHTTP2_PROTOCOL_ERROR, terminate: true)
        }
        needsSend()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        sendNow()
        for stream in streams.values { stream.readComplete() }
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        for stream in streams.values { stream.writabilityChanged() }
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }

    // MARK: For the streams

    func needsSend() {
        guard let context else { return }
        session.flushLater(context)
    }

    private func sendNow() {
        guard let context else { return }
        _ = session.flush(context)
    }

    /// Submits `stream`'s request; returns its id (not positive: refused).
    func submit(_ stream: HTTP2UpstreamStream, _ block: HeaderBlock, hasBody: Bool) -> Int32 {
        guard acceptsStreams else { return -1 }
        let id = session.submitRequest(block, body: hasBody)
        guard id > 0 else { return id }
        streams[id] = stream
        needsSend()
        return id
    }

    var isWritable: Bool { context?.channel.isWritable == true }
    func resume(_ stream: HTTP2UpstreamStream) { session.resume(stream: stream.id) }
    func consume(_ stream: HTTP2UpstreamStream, _ count: Int) { session.consume(stream: stream.id, count) }
    func consumeConnection(_ count: Int) { session?.consumeConnection(count) }
    func sendWindow(_ stream: HTTP2UpstreamStream) -> Int { session.sendWindow(stream: stream.id) }
    func bodyDrained(_ stream: HTTP2UpstreamStream) { session.bodyDrained(stream) }

    func reset(_ stream: HTTP2UpstreamStream) {
        session.reset(stream: stream.id, code: NGHTTP2_CANCEL)
        needsSend()
    }

    // MARK: The session's events

    func frameBegins(type: nghttp2_frame_type, stream: Int32) -> Bool { true }
    func headersBegin(stream: Int32, category: nghttp2_headers_category) {}

    func header(stream id: Int32, category: nghttp2_headers_category, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        streams[id]?.header(name: name, value: value)
    }

    func frameReceived(_ frame: HTTP2FrameSummary) {
        switch frame.type {
        case NGHTTP2_HEADERS:
            streams[frame.stream]?.headersEnded(endStream: frame.endStream)
        case NGHTTP2_DATA:
            if frame.endStream { streams[frame.stream]?.ended() }
        case NGHTTP2_WINDOW_UPDATE:
            if frame.stream == 0 {
                for stream in streams.values { stream.mayWriteAgain() }
            } else {
                streams[frame.stream]?.mayWriteAgain()
            }
        case NGHTTP2_GOAWAY:
            // Streams past its last one are closed by libnghttp2 as refused: they retry elsewhere.
            acceptsStreams = false
        default:
            break
        }
    }

    func dataReceived(stream id: Int32, _ bytes: UnsafeRawBufferPointer) {
        guard let stream = streams[id] else { return session.consumeConnection(bytes.count) }
        stream.dataReceived(bytes)
    }

    func streamClosed(stream id: Int32, errorCode: UInt32) {
        streams.removeValue(forKey: id)?.closed(errorCode: errorCode)
    }

    func readBody(stream id: Int32, into buffer: UnsafeMutableRawBufferPointer) -> HTTP2BodyRead {
        guard let stream = streams[id] else { return .bytes(0, end: true, trailers: false) }
        return stream.readBody(into: buffer)
    }

    private func closeAll() {
        acceptsStreams = false
        let closing = streams.values
        streams = [:]
        for stream in closing { stream.connectionClosed() }
    }
}
