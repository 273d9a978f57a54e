import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOHTTP2

/// One HTTP/2 stream as its call sees it: response parts become frames on the
/// connection, reading pauses by keeping the stream's window shut. Lives
/// until the stream closes; afterwards writes go nowhere.
final class HTTP2StreamClientSide: ClientSide {
    let id: HTTP2StreamID
    /// Holds the connection's handler until the stream closes (then the
    /// connection lets go of this stream, which breaks the cycle).
    private let connection: HTTP2StreamsHandler
    /// The stream's call; dropped when the stream closes.
    var proxy: ProxyHandler?
    private var open = true
    private var requestEnded = false
    private var responseEnded = false
    private var reading = true
    /// The stream's receive window as last reported, reopened while reading.
    private var receiveWindow: Int?
    private var sendWindow: Int
    /// The response's latest body part, written on the next write, flush or
    /// end: a small response's only DATA frame then carries END_STREAM, with
    /// no empty frame after it (one frame less per stream through
    /// swift-nio-http2's state machine, flow control and encoder).
    private var heldData: ByteBuffer?

    let eventLoop: EventLoop
    let allocator: ByteBufferAllocator

    /// What the request's Content-Length leaves to come, when it has one.
    private var remainingLength: Int?
    /// The request body's framing, known from the HEADERS frame.
    private let requestFraming: RequestFraming

    init(id: HTTP2StreamID, connection: HTTP2StreamsHandler, context: ChannelHandlerContext, contentLength: Int?, endStream: Bool) {
        self.id = id
        remainingLength = contentLength
        requestFraming = contentLength.map { .length($0) } ?? (endStream ? .none : .streamed)
        self.connection = connection
        sendWindow = connection.peerInitialWindow
        eventLoop = context.eventLoop
        allocator = context.channel.allocator
    }

    var isWritable: Bool {
        sendWindow > 0 && connection.connectionSendWindow > 0 && connection.context?.channel.isWritable == true
    }
    var isActive: Bool { open }
    var peerAddress: String { connection.peerAddress }
    /// HTTP/2 names the authority in `:authority`; no absolute-form target arrives here.
    var localAuthority: String { "" }

    /// Whether `count` more body bytes (and the request's end, when
    /// `endStream`) stay within the declared Content-Length and, at the end, fill it.
    func bodyArrived(_ count: Int, endStream: Bool) -> Bool {
        guard let remaining = remainingLength else { return true }
        remainingLength = remaining - count
        return remaining >= count && (!endStream || remaining == count)
    }

    func received(_ part: RequestPart, endStream: Bool) {
        if endStream { requestEnded = true }
        proxy?.process(part)
    }

    func write(_ part: ResponsePart) {
        guard open else { return }
        switch part {
        case .head(let head):
            connection.write(HTTP2Frame(streamID: id, payload: .headers(.init(headers: HPACKHeaders(response: head)))))
        case .body(let buffer):
            writeHeldData()
            heldData = buffer
        case .end:
            end(close: false)
        }
    }

    func flush() {
        writeHeldData()
        connection.flush()
    }

    private func writeHeldData(endStream: Bool = false) {
        guard let data = heldData else { return }
        heldData = nil
        connection.write(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(data), endStream: endStream))))
    }

    /// RFC 9113 §8.1: a response may end before the request did. The rest of
    /// the request is then read and dropped for up to the call's `lingerTime`
    /// and only then refused with RST_STREAM(NO_ERROR): some clients (curl
    /// 7.88) fail a call whose stream is reset, even after a whole answer.
    func end(close: Bool) {
        guard open, !responseEnded else { return }
        responseEnded = true
        // a response without a body still ends with a DATA frame: an empty one.
        if heldData == nil { heldData = allocator.buffer(capacity: 0) }
        writeHeldData(endStream: true)
        connection.flush()
        guard close, !requestEnded else { return }
        setReading(true)
        let lingerTime = proxy?.lingerTime ?? .seconds(5)
        eventLoop.assumeIsolated().scheduleTask(in: lingerTime) { [weak self] in self?.stopLingering() }
    }

    private func stopLingering() {
        guard open, !requestEnded else { return }
        connection.write(HTTP2Frame(streamID: id, payload: .rstStream(.noError)))
        connection.flush()
    }

    func close() {
        guard open, !(responseEnded && requestEnded) else { return }
        open = false
        heldData = nil
        connection.write(HTTP2Frame(streamID: id, payload: .rstStream(.cancel)))
        connection.flush()
    }

    func wake(at when: NIODeadline) { connection.wake(at: when) }
    var carriesOneExchange: Bool { true }

    func framing(of head: RequestHead) -> RequestFraming { requestFraming }

    func setReading(_ on: Bool) {
        guard reading != on else { return }
        reading = on
        if on, let receiveWindow { connection.reopen(id, window: receiveWindow, target: HTTP2StreamsHandler.defaultWindow) }
    }

    func receiveWindowChanged(_ window: Int) {
        receiveWindow = window
        if reading { connection.reopen(id, window: window, target: HTTP2StreamsHandler.defaultWindow) }
    }

    func sendWindowChanged(_ window: Int) {
        let wasBlocked = sendWindow <= 0
        sendWindow = window
        if wasBlocked, window > 0 { mayWriteAgain() }
    }

    func mayWriteAgain() {
        if isWritable { proxy?.clientBecameWritable() }
    }

    /// The stream is over (both sides ended, reset, or the connection went).
    func closed() {
        open = false
        heldData = nil
        let proxy = self.proxy
        self.proxy = nil
        proxy?.shared.metrics.streams.decrement()
        proxy?.detach()
    }
}
