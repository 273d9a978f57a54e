import NIOCore
import NIOHTTP1
import Rewriter

/// An HTTP/1.1 client connection: reads requests from its bytes and writes
/// answers as bytes, with the call logic in a CallRunner — no codec
/// handlers and no pipeline hop per request part. A pipelined request is
/// read only once the response before it has ended; until then its bytes wait
/// here (and reading pauses once `maxWaitingBytes` wait).
final class HTTP1ConnectionHandler: ChannelInboundHandler, ClientSide, NIOScheduledCallbackHandler {
    typealias InboundIn = ByteBuffer

    private let slot: ListenerSlot
    private var context: ChannelHandlerContext?
    private var runner: CallRunner?
    private var decoder: HTTP1RequestDecoder
    private var received = ByteBuffer()
    /// A pass over the waiting bytes is under way (a response ending inside it starts none).
    private var parsing = false
    private var state = HTTP1ConnectionStateMachine()
    private var readGate = ReadGate()
    /// After 101 Switching Protocols: bytes go to the upstream as they are.
    private var tunnel: Tunnel?
    private var timer = LazyTimer()
    /// The channel's writability, as its events tell it: read per body
    /// part, and asking the channel costs a pipeline lookup each time.
    private var writable = true

    /// The response being written: how its body is framed, and the bytes not
    /// yet handed to the channel (a small answer goes out as one write).
    private var framing = ResponseFraming.none
    private var out: ByteBuffer?
    private var spare = ReusableBuffer()

    enum ResponseFraming {
        case none
        case length
        case chunked
        /// HTTP/1.0 without a length: the body ends when the connection closes.
        case untilClose
    }

    static let maxWaitingBytes = 64 * 1024
    /// Body parts up to this size are copied into the response's own buffer.
    static let copyLimit = 4096

    let eventLoop: EventLoop
    let allocator: ByteBufferAllocator

    init(slot: ListenerSlot, channel: Channel) {
        self.slot = slot
        eventLoop = channel.eventLoop
        allocator = channel.allocator
        // The fields' limit (checked exactly per request, 431) plus 8 KiB
        // for the request line, as nginx's default large header buffer.
        decoder = HTTP1RequestDecoder(maxHeadBytes: slot.listener.config.limits.maxHeaderBytes + 8192)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        writable = context.channel.isWritable
        let runner = CallRunner(slot: slot, client: self)
        self.runner = runner
        // Added once the protocol is known, the channel is usually active already.
        if context.channel.isActive { runner.downstream.started() }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        runner?.detach()
        runner = nil
        timer.cancel()
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        runner?.downstream.started()
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if let tunnel { return tunnel.fromClient(unwrapInboundIn(data)) }
        guard state.readsRequests else { return }
        received.cumulate(unwrapInboundIn(data))
        parse()
    }

    /// Hands request parts to the call while it takes them.
    private func parse() {
        guard !parsing, state.readsRequests else { return }
        parsing = true
        defer { parsing = false }
        while let runner, state.acceptsRequestParts {
            let next: RequestPart?
            do {
                next = try decoder.next(&received)
            } catch {
                state.malformed()
                received = ByteBuffer()
                runner.malformed(.malformed(error))
                return
            }
            // Moved, not copied: a head still shared here would make the
            // call's first edit of its fields copy them all.
            guard let part = consume next else { break }
            // The connection's machine hears of it first: the call may answer at once.
            switch consume part {
            case .head(let head):
                state.requestHead()
                runner.requestHead(consume head)
            case .body(let buffer):
                runner.requestBody(buffer)
            case .end:
                if state.requestEnded() { updateReading() }
                runner.requestEnded()
            }
        }
        if received.readableBytes == 0 {
            received = ByteBuffer()
        } else if received.readerIndex > Self.maxWaitingBytes {
            received.discardReadBytes()
        }
        run(state.idleAfterParse())
        if state.waiting(tooMuch: received.readableBytes >= Self.maxWaitingBytes) { updateReading() }
    }

    func wake(at when: NIODeadline) { timer.wake(at: when, on: eventLoop, handler: self) }

    /// The decoder accepted the head's framing fields: chunked, one length, or none.
    var requestFraming: RequestFraming { request.framing }

    /// What the decoder noted of the request being answered (binding the
    /// head to read it copied the head). The next head is read only once
    /// this request's answer has ended.
    private var request: HTTP1RequestDecoder.HeadFacts { decoder.lastHead }

    func handleScheduledCallback(eventLoop: some EventLoop) {
        timer.fired()
        runner?.deadlinePassed()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        writable = context.channel.isWritable
        if writable { tunnel?.clientWritable() ?? runner?.clientBecameWritable() }
        context.fireChannelWritabilityChanged()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        tunnel?.clientReadComplete()
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        tunnel?.close()
        runner?.abandonCall()
        context.fireChannelInactive()
    }

    /// Graceful stop (drain): an idle connection closes now; one with a call
    /// in flight answers it with `Connection: close`, then closes. A client
    /// that stops sending gets its answers, then the connection closes.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .inputClosed = event as? ChannelEvent {
            if let tunnel { return tunnel.close() }
            return run(state.inputEnded(midRequest: !decoder.isIdle))
        }
        guard event is ChannelShouldQuiesceEvent else { return context.fireUserInboundEventTriggered(event) }
        // A tunnel runs until it ends or the drain's deadline closes it.
        guard tunnel == nil else { return }
        if runner?.downstream.quiesce() == true { context.close(promise: nil) }
    }

    /// Performs what the connection's state machine decided.
    private func run(_ action: HTTP1ConnectionStateMachine.Action) {
        guard let context else { return }
        let channel = context.channel
        switch action {
        case .none:
            return
        case .parse:
            updateReading()
            parse()
        case .close:
            context.close(promise: nil)
        case .closeAfterWrites, .lingerAfterWrites:
            let linger = action == .lingerAfterWrites
            if linger {
                received = ByteBuffer()
                updateReading()
            }
            let last = out ?? ByteBuffer()
            out = nil
            let lingerTime = runner?.downstream.lingerTime ?? .seconds(5)
            // Closed once the last bytes are written, not before.
            context.writeAndFlush(NIOAny(last)).whenComplete { _ in
                guard linger else { return channel.close(promise: nil) }
                channel.close(mode: .output).whenFailure { _ in channel.close(promise: nil) }
                channel.eventLoop.scheduleTask(in: lingerTime) { channel.close(promise: nil) }
            }
        }
    }

    // MARK: ClientSide

    var carriesOneExchange: Bool { false }
    var exchange: ExchangeStateMachine<LoopInstant> {
        get { state.exchange }
        _modify { yield &state.exchange }
    }
    var isWritable: Bool { context != nil && writable }
    var isActive: Bool { context?.channel.isActive ?? false }
    lazy var peerAddress = context?.channel.remoteAddress?.ipAddress ?? "unknown"
    lazy var localAuthority = context?.channel.localAddress?.hostAndPort ?? ""
    lazy var connectionFacts = ConnectionFacts(context)

    func write(_ part: ResponsePart) {
        switch part {
        case .head(let head):
            writeHead(head)
        case .body(let buffer):
            writeBody(buffer)
        case .end:
            end(close: false)
        }
    }

    private func writeHead(_ head: ResponseHead) {
        var buffer = outBuffer()
        let (hasLength, hasConnection) = buffer.writeStatusLine(head)
        let code = head.status.code
        if code < 200 {
            // Interim (100 Continue): the real answer follows.
        } else if request.isHEAD || code == 204 || code == 304 {
            framing = .none
        } else if hasLength {
            framing = .length
        } else if request.isHTTP10 {
            framing = .untilClose
            if !hasConnection { buffer.writeStaticString("Connection: close\r\n") }
        } else {
            framing = .chunked
            buffer.writeStaticString("Transfer-Encoding: chunked\r\n")
        }
        // An HTTP/1.0 client that asked to keep the connection is told so.
        if code >= 200, request.isHTTP10, request.keepsAlive, !hasConnection, framing != .untilClose {
            buffer.writeStaticString("Connection: keep-alive\r\n")
        }
        buffer.writeStaticString("\r\n")
        out = buffer
    }

    private func writeBody(_ part: ByteBuffer) {
        let size = part.readableBytes
        guard size > 0 else { return }
        switch framing {
        case .none:
            return
        case .chunked:
            var buffer = outBuffer()
            buffer.writeChunkSize(size)
            out = buffer
            append(part)
            out!.writeStaticString("\r\n")
        case .length, .untilClose:
            append(part)
        }
    }

    /// A small part is copied behind what is waiting; a large one goes as it is.
    private func append(_ part: ByteBuffer) {
        if part.readableBytes <= Self.copyLimit {
            var buffer = outBuffer()
            var part = part
            buffer.writeBuffer(&part)
            out = buffer
        } else {
            writeOut()
            context?.write(NIOAny(part), promise: nil)
            out = outBuffer()
        }
    }

    private func outBuffer() -> ByteBuffer {
        if let out {
            self.out = nil
            return out
        }
        return spare.take(allocator, capacity: 512)
    }

    private func writeOut() {
        guard let buffer = out else { return }
        out = nil
        guard buffer.readableBytes > 0 else { return }
        context?.write(NIOAny(buffer), promise: nil)
        spare.keep(buffer)
    }

    func flush() {
        writeOut()
        context?.flush()
    }

    func end(close: Bool) {
        if framing == .chunked { out = outBuffer(); out!.writeStaticString("0\r\n\r\n") }
        let close = close || framing == .untilClose
        framing = .none
        // Kept alive: flushed, then the next pipelined request if it waits.
        if !close { flush() }
        run(state.responseEnded(close: close, unreadInput: !decoder.isIdle || received.readableBytes > 0))
    }

    func close() {
        out = nil
        context?.close(promise: nil)
    }

    func setReading(_ on: Bool) {
        if state.callWantsInput(on) { updateReading() }
    }

    private func updateReading() { readGate.set(open: state.readOpen, on: context?.channel) }

    /// The 101 went out: from now on the connection is one end of `tunnel`;
    /// bytes the client sent after its request head go through first.
    var canTunnel: Bool { !request.isHTTP10 }

    func startTunnel(_ tunnel: Tunnel) -> Bool {
        self.tunnel = tunnel
        readGate.set(open: true, on: context?.channel)
        let early = received
        received = ByteBuffer()
        tunnel.fromClientEarly([early])
        return true
    }
}

extension HTTP1ConnectionHandler: TunnelEnd {
    func tunnelWrite(_ buffer: ByteBuffer) { context?.write(NIOAny(buffer), promise: nil) }
    func flushTunnel() { context?.flush() }
    var tunnelWritable: Bool { isWritable }
    func setTunnelReading(_ on: Bool) { readGate.set(open: on, on: context?.channel) }
    func closeTunnel() { context?.close(promise: nil) }
}
