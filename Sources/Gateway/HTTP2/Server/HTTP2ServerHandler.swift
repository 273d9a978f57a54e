import CNGHTTP2
import NIOCore
import NIOHTTP1

/// Serves one HTTP/2 connection (h2c or h2 over TLS) on libnghttp2: the
/// connection's bytes go into its session, what the session has to send
/// goes out in one write and flush per read batch or event-loop tick, and
/// each stream is a CallRunner fed by an `HTTP2ServerStream` (no child
/// channel or pipeline per stream). Also the connection's manager: GOAWAY
/// once idle for `idle_timeout`, a PING that closes a peer gone silent with
/// streams open, GOAWAY on drain letting streams in flight finish.
final class HTTP2ServerHandler: ChannelInboundHandler, NGHTTP2SessionDelegate, NIOScheduledCallbackHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let slot: ListenerSlot
    private var session: NGHTTP2Session!
    private(set) var context: ChannelHandlerContext?
    private var streams: [Int32: HTTP2ServerStream] = [:]
    private(set) lazy var peerAddress = context?.channel.remoteAddress?.ipAddress ?? "unknown"
    private(set) lazy var connectionFacts = ConnectionFacts(context)
    let maxHeaderBytes: Int
    private let idleTimeout: TimeAmount

    /// The connection's idle and keep-alive checks and its drain.
    private var machine: HTTP2ConnectionStateMachine
    /// The streams' deadlines and the connection's checks share one wake-up.
    private var timer = LazyTimer()
    private var resets = FloodLimit(limit: 200, window: .seconds(30))
    private var streamIDs = ClientStreamIDs()
    /// Empty DATA frames that do not end their stream carry nothing but cost a frame each (CVE-2019-9518).
    private var emptyData = FloodLimit(limit: 100, window: .seconds(30))

    /// The connection window is kept this open: every stream's data is bounded by its own window already.
    static let connectionWindow: Int32 = 1 << 20

    init(slot: ListenerSlot) {
        self.slot = slot
        maxHeaderBytes = slot.listener.config.limits.maxHeaderBytes
        idleTimeout = slot.listener.config.limits.idleTimeout.timeAmount
        // Started again once the handler is on its loop (`handlerAdded`).
        machine = HTTP2ConnectionStateMachine(now: .now(), idleTimeout: idleTimeout)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        // Rapid reset is counted here first (our GOAWAY names the last stream
        // processed, with ENHANCE_YOUR_CALM); libnghttp2's own limit stays behind it.
        session = NGHTTP2Session(server: true, delegate: self,
                                 options: .init(resetBurst: UInt64(2 * resets.limit), resetRate: 33, manualWindowUpdates: true))
        session.submitSettings([
            (NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 256),
            (NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, UInt32(clamping: maxHeaderBytes)),
            // RFC 8441: WebSockets over HTTP/2 by extended CONNECT.
            (NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL, 1),
        ])
        session.setLocalWindow(stream: 0, size: Self.connectionWindow)
        machine = HTTP2ConnectionStateMachine(now: context.eventLoop.now, idleTimeout: idleTimeout)
        run(machine.firstWake)
        if context.channel.isActive { sendNow() }
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
        machine.read(now: context.eventLoop.now)
        let result = session.receive(unwrapInboundIn(data))
        guard result >= 0 else { return failed(result) }
        // What the read produced goes out at the read batch's end (or this tick's, should that not come).
        needsSend()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        sendNow()
        context.fireChannelReadComplete()
    }

    /// libnghttp2 refused the input outright (not a frame error, which it
    /// answers with GOAWAY itself): a floods' GOAWAY says calm down, anything
    /// else is a protocol error; then the connection closes.
    private func failed(_ code: Int) {
        let error: nghttp2_error_code = switch Int32(code) {
        case NGHTTP2_ERR_FLOODED.rawValue, NGHTTP2_ERR_TOO_MANY_CONTINUATIONS.rawValue: NGHTTP2_ENHANCE_YOUR_CALM
        default: NGHTTP2_PROTOCOL_ERROR
        }
        session.goAway(lastStream: session.lastProcessedStream, code: error, terminate: true)
        sendNow()
    }

    // MARK: Output

    /// A stream has output: sent at the end of this read batch, or of this tick.
    func needsSend() {
        guard let context else { return }
        session.flushLater(context)
    }

    private func sendNow() {
        guard let context else { return }
        _ = session.flush(context)
    }

    // MARK: The session's events

    func frameBegins(type: nghttp2_frame_type, stream id: Int32) -> Bool {
        type != NGHTTP2_HEADERS || streamIDs.headers(on: id)
    }

    func headersBegin(stream id: Int32, category: nghttp2_headers_category) {
        guard category == NGHTTP2_HCAT_REQUEST, let context else { return }
        streams[id] = HTTP2ServerStream(id: id, connection: self, context: context)
    }

    func header(stream id: Int32, category: nghttp2_headers_category, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        // Trailers' fields are checked by libnghttp2 and not forwarded.
        guard category == NGHTTP2_HCAT_REQUEST, let stream = streams[id] else { return }
        stream.header(name: name, value: value)
    }

    func frameReceived(_ frame: HTTP2FrameSummary) {
        switch frame.type {
        case NGHTTP2_HEADERS:
            guard let stream = streams[frame.stream] else { return }
            if frame.category == NGHTTP2_HCAT_REQUEST {
                stream.headersEnded(endStream: frame.endStream)
            } else if frame.endStream {
                stream.endRequest()
            }
        case NGHTTP2_DATA:
            if frame.length == 0, !frame.endStream, emptyData.record(at: now) { return calmDown() }
            if frame.endStream { streams[frame.stream]?.endRequest() }
        case NGHTTP2_RST_STREAM:
            if resets.record(at: now) { calmDown() }
        case NGHTTP2_WINDOW_UPDATE:
            if frame.stream == 0 {
                for stream in streams.values { stream.mayWriteAgain() }
            } else {
                streams[frame.stream]?.mayWriteAgain()
            }
        default:
            break
        }
    }

    /// GOAWAY(ENHANCE_YOUR_CALM) naming the last stream the gateway acted on
    /// (RFC 9113 §6.8: the client learns which requests may have run), then close.
    private func calmDown() {
        session.goAway(lastStream: session.lastProcessedStream, code: NGHTTP2_ENHANCE_YOUR_CALM, terminate: true)
    }

    func dataReceived(stream id: Int32, _ bytes: UnsafeRawBufferPointer) {
        guard let stream = streams[id] else { return session.consumeConnection(bytes.count) }
        stream.received(bytes)
    }

    func streamClosed(stream id: Int32, errorCode: UInt32) {
        streams.removeValue(forKey: id)?.closed()
        guard streams.isEmpty else { return }
        run(machine.lastStreamClosed(now: now))
    }

    func readBody(stream id: Int32, into buffer: UnsafeMutableRawBufferPointer) -> HTTP2BodyRead {
        guard let stream = streams[id] else { return .bytes(0, end: true, trailers: false) }
        return stream.readBody(into: buffer)
    }

    // MARK: For the streams

    func submitResponse(_ stream: HTTP2ServerStream, _ block: HeaderBlock, body: Bool) {
        session.submitResponse(stream: stream.id, block, body: body)
    }

    func submitHeaders(_ stream: HTTP2ServerStream, _ block: HeaderBlock, endStream: Bool) {
        session.submitHeaders(stream: stream.id, block, endStream: endStream)
    }

    func resume(_ stream: HTTP2ServerStream) { session.resume(stream: stream.id) }
    func reset(_ stream: HTTP2ServerStream, code: nghttp2_error_code) { session.reset(stream: stream.id, code: code) }
    func consume(_ stream: HTTP2ServerStream, _ count: Int) { session.consume(stream: stream.id, count) }
    func consumeConnection(_ count: Int) { session?.consumeConnection(count) }
    func sendWindow(_ stream: HTTP2ServerStream) -> Int { session.sendWindow(stream: stream.id) }
    func bodyDrained(_ stream: HTTP2ServerStream) { session.bodyDrained(stream) }

    var isWritable: Bool { context?.channel.isWritable == true }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { for stream in streams.values { stream.mayWriteAgain() } }
        context.fireChannelWritabilityChanged()
    }

    /// Drain (the listener quiesces): no new streams, those in flight finish.
    /// The final GOAWAY follows the notice after a round trip's grace (or
    /// when the last stream ends), so requests already on their way are
    /// still served and the client learns which were (RFC 9113 §6.8).
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is ChannelShouldQuiesceEvent else { return context.fireUserInboundEventTriggered(event) }
        run(machine.quiesce(streamsOpen: !streams.isEmpty))
    }

    /// Performs what the connection's machine decided; a frame it queues
    /// goes out at once (a timer's wake-up that only re-arms writes nothing).
    private func run(_ action: HTTP2ConnectionStateMachine.Action) {
        guard let context else { return }
        switch action {
        case .none:
            return
        case .wake(let when):
            wake(at: when)
        case .ping(let when):
            session.ping()
            sendNow()
            wake(at: when)
        case .sendNotice(let grace):
            session.shutdownNotice()
            sendNow()
            context.eventLoop.assumeIsolated().scheduleTask(in: grace) { [self] in run(machine.graceEnded()) }
        case .goAway:
            session.goAway(lastStream: session.lastProcessedStream, code: NGHTTP2_NO_ERROR, terminate: false)
            sendNow()
        case .close:
            context.close(promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }

    // MARK: Time

    /// The event loop's clock (an embedded loop's is advanced by hand in tests).
    private var now: NIODeadline { context?.eventLoop.now ?? .now() }

    func wake(at when: NIODeadline) {
        guard let context else { return }
        timer.wake(at: when, on: context.eventLoop, handler: self)
    }

    /// Each stream whose deadline has not come yet asks again; then the
    /// connection's own checks.
    func handleScheduledCallback(eventLoop: some EventLoop) {
        timer.fired()
        for stream in streams.values { stream.runner?.deadlinePassed() }
        run(machine.timerFired(now: now, streamsOpen: !streams.isEmpty))
    }

    private func closeAll() {
        machine.closed()
        timer.cancel()
        let closing = streams.values
        streams = [:]
        for stream in closing { stream.closed() }
    }
}
