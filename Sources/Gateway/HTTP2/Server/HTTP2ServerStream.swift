import CNGHTTP2
import Foundation
import NIOCore
import NIOHTTP1

/// One HTTP/2 stream as its call sees it: the request's fields and DATA
/// arrive from the connection's session; the response is queued here and
/// taken by libnghttp2 as the peer's windows allow (`readBody`). Reading
/// pauses by not consuming what arrived, which keeps the stream's window
/// shut. Lives until the stream closes; afterwards writes go nowhere.
final class HTTP2ServerStream: ClientSide, HTTP2BodySource {
    let id: Int32
    /// Holds the connection's handler until the stream closes (then the
    /// connection lets go of this stream, which breaks the cycle).
    private let connection: HTTP2ServerHandler
    /// The stream's call; dropped when the stream closes.
    var runner: CallRunner?
    let eventLoop: EventLoop
    let allocator: ByteBufferAllocator

    /// Where the stream is: its request, its answer, or its tunnel.
    private var machine = HTTP2ServerStreamStateMachine()
    private var request = HTTP2RequestHeadBuilder()
    /// The header block's size as RFC 7541 §4.1 counts it.
    private var headerBytes = 0
    private(set) var requestFraming = RequestFraming.none
    /// After the switch: the tunnel the stream's DATA goes through.
    private var tunnel: Tunnel?

    init(id: Int32, connection: HTTP2ServerHandler, context: ChannelHandlerContext) {
        self.id = id
        self.connection = connection
        eventLoop = context.eventLoop
        allocator = context.channel.allocator
    }

    var isActive: Bool { machine.isOpen }
    var peerAddress: String { connection.peerAddress }
    /// HTTP/2 names the authority in `:authority`; no absolute-form target arrives here.
    var localAuthority: String { "" }
    var connectionFacts: ConnectionFacts { connection.connectionFacts }
    var carriesOneExchange: Bool { true }
    var exchange: ExchangeStateMachine<LoopInstant> {
        get { machine.exchange }
        _modify { yield &machine.exchange }
    }
    /// An extended CONNECT's upstream switched: DATA that came before goes through first.
    func startTunnel(_ tunnel: Tunnel) -> Bool {
        guard let (early, consume) = machine.switched() else { return false }
        self.tunnel = tunnel
        if consume > 0 {
            connection.consume(self, consume)
            connection.needsSend()
        }
        tunnel.fromClientEarly(early)
        return true
    }

    /// Only an extended CONNECT becomes a tunnel.
    var canTunnel: Bool { machine.canTunnel }

    /// A fresh `Sec-WebSocket-Key` (RFC 6455 §4.1: 16 random bytes, base64).
    static func websocketKey() -> String {
        Data((0..<16).map { _ in UInt8.random(in: 0 ... .max) }).base64EncodedString()
    }

    func wake(at when: NIODeadline) { connection.wake(at: when) }

    /// Writable while what is queued fits in the windows the peer has
    /// opened: a client that announced a 0 window gets nothing read ahead
    /// from the upstream for it.
    var isWritable: Bool { connection.isWritable && machine.flow.fits(window: connection.sendWindow(self)) }

    // MARK: The request

    func header(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        headerBytes += name.count + value.count + 32
        guard headerBytes <= connection.maxHeaderBytes else { return }
        request.add(name: String(decoding: name, as: UTF8.self), value: String(decoding: value, as: UTF8.self))
    }

    /// The request's header block is complete: its call starts, or it is
    /// refused (431 past the size limit; a malformed block resets the stream only).
    func headersEnded(endStream: Bool) {
        let runner = CallRunner(slot: connection.slot, client: self)
        guard headerBytes <= connection.maxHeaderBytes else {
            self.runner = runner
            runner.listener.metrics.streams.increment()
            machine.headersEnded(connect: false, ended: endStream)
            return runner.downstream.refuse(request.summary, .headersTooLarge("the header block exceeds limits.max_header_bytes (\(connection.maxHeaderBytes))"))
        }
        // Taken out whole (an empty builder allocates nothing): the head takes its fields over.
        var block = HTTP2RequestHeadBuilder()
        swap(&block, &request)
        let connectProtocol = block.connectProtocol
        guard let head = (consume block).head(websocketKey: Self.websocketKey()), let framing = Self.framing(head, endStream: endStream) else {
            connection.reset(self, code: NGHTTP2_PROTOCOL_ERROR)
            return connection.needsSend()
        }
        machine.headersEnded(connect: connectProtocol != nil)
        self.runner = runner
        runner.listener.metrics.streams.increment()
        guard connectProtocol == nil else {
            // The HTTP request is the head alone; the stream's DATA belongs to the tunnel.
            requestFraming = .none
            runner.requestHead(consume head)
            return runner.requestEnded()
        }
        requestFraming = framing
        // Moved: the call edits its fields, which a copy here would share.
        runner.requestHead(consume head)
        if endStream { endRequest() }
    }

    private static func framing(_ head: RequestHead, endStream: Bool) -> RequestFraming? {
        // The builder refused a Content-Length HTTP/1.1 would not read.
        guard let length = (try? HTTP1RequestDecoder.contentLength(head.headers)) ?? nil else { return endStream ? RequestFraming.none : .streamed }
        // RFC 9113 §8.1.1: a request that ends here has no body, whatever it declared.
        return endStream && length != 0 ? nil : .length(length)
    }

    func received(_ bytes: UnsafeRawBufferPointer) {
        let (destination, consume) = machine.received(bytes.count)
        if consume > 0 { connection.consume(self, consume) }
        guard destination != .drop else { return }
        let buffer = allocator.buffer(bytes: bytes)
        switch destination {
        case .call: runner?.requestBody(buffer)
        case .early: machine.keepEarly(buffer)
        case .tunnel:
            tunnel?.fromClient(buffer)
            tunnel?.clientReadComplete()
        case .drop: break
        }
    }

    func endRequest() {
        switch machine.requestEnded() {
        case .none: break
        case .tellCall: runner?.requestEnded()
        case .closeTunnel: tunnel?.close()
        case .cancel: close()
        }
    }

    func setReading(_ on: Bool) {
        let count = machine.setReading(on)
        guard count > 0 else { return }
        connection.consume(self, count)
        connection.needsSend()
    }

    // MARK: The response

    func write(_ part: ResponsePart) {
        switch part {
        case .head(let head):
            // An interim response (100 Continue) goes out at once, as its own HEADERS.
            guard let interim = machine.writeHead(head) else { return }
            connection.submitHeaders(self, HeaderBlock(response: interim), endStream: false)
        case .body(let buffer):
            machine.writeBody(buffer)
        case .end(let trailers):
            run(machine.writeEnd(trailers: trailers))
        }
    }

    func flush() {
        switch machine.submit() {
        case .none: break
        case .submit(let head, let body): connection.submitResponse(self, HeaderBlock(response: head), body: body)
        case .resume: connection.resume(self)
        }
        connection.needsSend()
    }

    /// libnghttp2 asks for up to `buffer.count` bytes of DATA (what the
    /// windows allow); the last bytes carry END_STREAM, or trailers follow.
    func readBody(into buffer: UnsafeMutableRawBufferPointer) -> HTTP2BodyRead {
        let (read, trailers) = machine.read(into: buffer)
        guard case .bytes(let copied, let end) = read else { return .deferred }
        if copied > 0, !machine.flow.sendingEnded { connection.bodyDrained(self) }
        guard end else { return .bytes(copied, end: false, trailers: false) }
        guard let trailers else { return .bytes(copied, end: true, trailers: false) }
        connection.submitHeaders(self, HeaderBlock(trailers: trailers), endStream: true)
        return .bytes(copied, end: true, trailers: true)
    }

    /// RFC 9113 §8.1: an answer may end before its request did. The rest of
    /// the request is then read and dropped for up to the call's `lingerTime`
    /// and only then refused with RST_STREAM(NO_ERROR): some clients (curl
    /// 7.88) fail a call whose stream is reset, even after a whole answer.
    func end(close: Bool) { run(machine.responseEnded(close: close)) }

    private func run(_ action: HTTP2ServerStreamStateMachine.ResponseEndAction) {
        switch action {
        case .none:
            return
        case .flush:
            flush()
        case .flushThenLinger:
            flush()
            setReading(true)
            let lingerTime = runner?.downstream.lingerTime ?? .seconds(5)
            eventLoop.assumeIsolated().scheduleTask(in: lingerTime) { [weak self] in self?.stopLingering() }
        }
    }

    private func stopLingering() {
        guard machine.lingerEnded() else { return }
        connection.reset(self, code: NGHTTP2_NO_ERROR)
        connection.needsSend()
    }

    func close() {
        guard machine.cancel() else { return }
        connection.reset(self, code: NGHTTP2_CANCEL)
        connection.needsSend()
    }

    func mayWriteAgain() {
        if machine.isOpen, isWritable { runner?.clientBecameWritable() }
    }

    /// The stream is over (both sides ended, reset, or the connection went):
    /// what its call never read still counts against the connection's window.
    func closed() {
        tunnel?.close()
        tunnel = nil
        connection.consumeConnection(machine.closed())
        let runner = self.runner
        self.runner = nil
        runner?.listener.metrics.streams.decrement()
        runner?.detach()
    }
}

/// An extended CONNECT's stream as one end of a tunnel: DATA both ways,
/// paced by the stream's windows.
extension HTTP2ServerStream: TunnelEnd {
    func tunnelWrite(_ buffer: ByteBuffer) { write(.body(buffer)) }
    func flushTunnel() { flush() }
    var tunnelWritable: Bool { isWritable }
    func setTunnelReading(_ on: Bool) { setReading(on) }
    func closeTunnel() { end(close: true) }
}
