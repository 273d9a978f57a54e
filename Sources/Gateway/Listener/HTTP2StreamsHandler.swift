import NIOCore
import NIOHTTP1
import NIOHTTP2

/// Serves an HTTP/2 connection's streams inline, as HAProxy and nghttpx do:
/// each stream is a ProxyHandler fed frames by this handler, with no child
/// channel, pipeline or HTTP/1 translation codec per stream (those were
/// about 2/3 of the CPU per h2c call). Sits between NIOHTTP2Handler (framing,
/// HPACK, stream states, outbound flow control) and its connection manager
/// (idle GOAWAY, keepalive, drain), which gets the connection-level frames
/// and stream events after it; does the inbound flow control a child
/// channel did: a stream's window is only reopened while its call reads, so
/// a paused upload is held to one window.
final class HTTP2StreamsHandler: ChannelInboundHandler, NIOScheduledCallbackHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private let slot: ListenerSlot
    private(set) var context: ChannelHandlerContext?
    private var streams: [HTTP2StreamID: HTTP2StreamClientSide] = [:]
    /// Streams NIOHTTP2Handler announced as created. It also reports a closed
    /// stream it refused before creating it (a request without `:path`),
    /// which its connection manager asserts on: that event is not passed on.
    private var announced: Set<HTTP2StreamID> = []
    private(set) lazy var peerAddress = context?.channel.remoteAddress?.ipAddress ?? "unknown"
    /// What the peer still lets us send on the connection as a whole.
    private(set) var connectionSendWindow = defaultWindow
    /// The peer's SETTINGS_INITIAL_WINDOW_SIZE: what a new stream may be
    /// sent before the peer opens its window (0 from a client that wants
    /// every byte on request; then nothing is read ahead from the upstream).
    private(set) var peerInitialWindow = defaultWindow
    /// The streams' deadlines share one wake-up: no timer scheduled and
    /// cancelled per stream.
    private var timer = LazyTimer()
    private var resets = ResetRateLimit()
    /// The highest stream whose request was handed to a call.
    private var lastStreamServed = HTTP2StreamID.rootStream

    /// The connection window is kept this open: every stream's data is
    /// bounded by its own window already.
    static let connectionWindowTarget = 1 << 20
    /// RFC 9113 §6.9.2: every window's initial size until SETTINGS say
    /// otherwise; our streams' receive windows stay at it.
    static let defaultWindow = 65_535

    init(slot: ListenerSlot) { self.slot = slot }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) {
        closeAll()
        self.context = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        closeAll()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .headers, .data:
            serve(frame, context: context)
        case .rstStream where resets.reset(at: .now()):
            // A non-NO_ERROR GOAWAY closes the connection (CloseAfterErrorGoAway).
            context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .goAway(
                lastStreamID: lastStreamServed, errorCode: .enhanceYourCalm, opaqueData: nil))), promise: nil)
        default:
            // The connection manager wants PING acknowledgements; its
            // keepalive timer restarts after every read anyway.
            context.fireChannelRead(data)
        }
    }

    private func serve(_ frame: HTTP2Frame, context: ChannelHandlerContext) {
        switch frame.payload {
        case .headers(let headers):
            if let stream = streams[frame.streamID] {
                // Trailers end the request; their fields are not forwarded.
                guard HTTP2Fields.isValidTrailers(headers.headers), stream.bodyArrived(0, endStream: headers.endStream) else {
                    return refuse(frame.streamID, context: context)
                }
                if headers.endStream { stream.received(.end(nil), endStream: true) }
                return
            }
            guard let head = RequestHead(http2: headers.headers, endStream: headers.endStream) else {
                return refuse(frame.streamID, context: context)
            }
            let stream = HTTP2StreamClientSide(id: frame.streamID, connection: self, context: context,
                                               contentLength: try? HTTP1RequestDecoder.contentLength(head.headers),
                                               endStream: headers.endStream)
            guard stream.bodyArrived(0, endStream: headers.endStream) else { return refuse(frame.streamID, context: context) }
            lastStreamServed = max(lastStreamServed, frame.streamID)
            let proxy = ProxyHandler(slot: slot, client: stream)
            stream.proxy = proxy
            streams[frame.streamID] = stream
            proxy.shared.metrics.streams.increment()
            stream.received(.head(head), endStream: false)
            if headers.endStream { stream.received(.end(nil), endStream: true) }
        case .data(let data):
            guard let stream = streams[frame.streamID], case .byteBuffer(let buffer) = data.data else { return }
            // RFC 9113 §8.1.1: DATA that does not add up to the Content-Length is malformed.
            guard stream.bodyArrived(buffer.readableBytes, endStream: data.endStream) else { return refuse(frame.streamID, context: context) }
            if buffer.readableBytes > 0 { stream.received(.body(buffer), endStream: false) }
            if data.endStream { stream.received(.end(nil), endStream: true) }
        default:
            break
        }
    }

    /// A malformed request (RFC 9113 §8.1.1) resets its stream only.
    private func refuse(_ streamID: HTTP2StreamID, context: ChannelHandlerContext) {
        context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .rstStream(.protocolError))), promise: nil)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case let event as NIOHTTP2WindowUpdatedEvent:
            windowUpdated(event)
        case let event as NIOHTTP2StreamCreatedEvent:
            announced.insert(event.streamID)
            // swift-nio-http2's "local" window is what we may send.
            if let window = event.localInitialWindowSize.map(Int.init) {
                peerInitialWindow = window
                streams[event.streamID]?.sendWindowChanged(window)
            }
            context.fireUserInboundEventTriggered(event)
        case let event as StreamClosedEvent:
            if let stream = streams.removeValue(forKey: event.streamID) { stream.closed() }
            if announced.remove(event.streamID) != nil { context.fireUserInboundEventTriggered(event) }
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    private func windowUpdated(_ event: NIOHTTP2WindowUpdatedEvent) {
        guard event.streamID != .rootStream else {
            if let inbound = event.inboundWindowSize { reopen(.rootStream, window: inbound, target: Self.connectionWindowTarget) }
            guard let outbound = event.outboundWindowSize else { return }
            let wasBlocked = connectionSendWindow <= 0
            connectionSendWindow = outbound
            if wasBlocked, outbound > 0 { for stream in streams.values { stream.mayWriteAgain() } }
            return
        }
        guard let stream = streams[event.streamID] else { return }
        if let inbound = event.inboundWindowSize { stream.receiveWindowChanged(inbound) }
        if let outbound = event.outboundWindowSize { stream.sendWindowChanged(outbound) }
    }

    /// RFC 9113 §6.9: a WINDOW_UPDATE once a window is down to half its
    /// target, back up to the target (the rule swift-nio-http2's child
    /// channels follow).
    func reopen(_ streamID: HTTP2StreamID, window: Int, target: Int) {
        guard window < target, target - window >= window, let context else { return }
        context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .windowUpdate(windowSizeIncrement: target - window))),
                              promise: nil)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { for stream in streams.values { stream.mayWriteAgain() } }
        context.fireChannelWritabilityChanged()
    }

    /// NIOHTTP2Handler has already reset the stream (or sent GOAWAY) and
    /// reports a closed stream by event: nothing is left to do here.
    func errorCaught(context: ChannelHandlerContext, error: Error) {}

    func write(_ frame: HTTP2Frame) {
        context?.write(wrapOutboundOut(frame), promise: nil)
    }

    func flush() { context?.flush() }

    func wake(at when: NIODeadline) {
        guard let context else { return }
        timer.wake(at: when, on: context.eventLoop, handler: self)
    }

    /// Each stream whose deadline has not come yet asks again.
    func handleScheduledCallback(eventLoop: some EventLoop) {
        timer.fired()
        for stream in streams.values { stream.proxy?.deadlinePassed() }
    }

    private func closeAll() {
        timer.cancel()
        let closing = streams.values
        streams = [:]
        for stream in closing { stream.closed() }
    }
}
