import NIOCore
import NIOHTTP1

/// One keep-alive HTTP/1.1 connection to an upstream, owned by a pool on
/// one event loop: requests are written as bytes, responses read by
/// HTTP1UpstreamHandler. Not Sendable on purpose: it lives on its loop only.
final class HTTP1UpstreamConnection: UpstreamConnection {
    let channel: Channel
    let upstream: String
    var exchange = UpstreamExchange()
    private(set) lazy var peerAddress = channel.remoteAddress.map(\.hostAndPort) ?? upstream
    private var readGate = ReadGate()
    /// HTTP1UpstreamHandler's, the pipeline's last, from before the
    /// connection is handed out until its channel closes: requests are
    /// written there, not through the channel (no walk from the pipeline's tail).
    var context: ChannelHandlerContext?
    weak var pool: UpstreamPool?
    /// After a 101: the connection is one end of a tunnel, never pooled again.
    private(set) var tunnel: Tunnel?
    /// Whether it may go back to the pool, decided from every byte read.
    private(set) var machine = HTTP1UpstreamStateMachine()
    /// The streamed request body goes in chunks (it has no Content-Length).
    private var chunked = false
    private var spare = ReusableBuffer()
    /// What was read and not yet decoded: bytes left here when an answer ends are stray.
    var received = ByteBuffer()
    var decoder = HTTP1ResponseDecoder(maxHeadBytes: HTTP1UpstreamConnection.maxHeadBytes)

    /// A response's head is read up to this size (NIO's default limit).
    static let maxHeadBytes = 80 * 1024

    let endpoint: Endpoint
    /// Its pool's place for its endpoint, where it idles between calls.
    let slot: UpstreamPool.Slot

    init(channel: Channel, upstream: String, endpoint: Endpoint, slot: UpstreamPool.Slot) {
        self.channel = channel
        self.upstream = upstream
        self.endpoint = endpoint
        self.slot = slot
    }

    private func write(_ buffer: ByteBuffer, flush: Bool = false) {
        if flush { context?.writeAndFlush(NIOAny(buffer), promise: nil) } else { context?.write(NIOAny(buffer), promise: nil) }
    }

    private func flush() { context?.flush() }

    /// The whole request in one write.
    func send(_ request: UpstreamRequest, delegate: UpstreamResponseDelegate) {
        var out = start(request, delegate: delegate, extra: request.body?.count ?? 0)
        if let body = request.body { out.writeBytes(body) }
        exchange.requestCompleted()
        guard channel.isActive else { return closed() }
        // NIO reports a failed write by closing the channel inside this call.
        exchange.writing()
        write(out, flush: true)
        exchange.written()
        spare.keep(out)
    }

    func sendHead(_ request: UpstreamRequest, delegate: UpstreamResponseDelegate) {
        let out = start(request, delegate: delegate, extra: 0)
        guard channel.isActive else { return closed() }
        exchange.written()
        write(out)
        spare.keep(out)
    }

    /// The request head as bytes, with room for `extra` more.
    private func start(_ request: UpstreamRequest, delegate: UpstreamResponseDelegate, extra: Int) -> ByteBuffer {
        exchange.begin(delegate, on: endpoint, upgrade: request.headers["Upgrade"])
        machine.requestStarted(keepAlive: !ConnectionOptions(fields: request.headers).close)
        chunked = request.framing == .streamed
        decoder.expect(method: HTTPMethod(rawValue: request.method))
        var out = spare.take(channel.allocator, capacity: 512 + extra)
        out.writeRequestHead(method: request.method, target: request.target, headers: request.headers, framing: request.framing)
        return out
    }

    func sendBody(_ buffer: ByteBuffer) {
        guard chunked else { return write(buffer, flush: true) }
        guard buffer.readableBytes > 0 else { return }
        var frame = channel.allocator.buffer(capacity: 24)
        frame.writeChunkSize(buffer.readableBytes)
        write(frame)
        write(buffer)
        write(channel.allocator.buffer(staticString: "\r\n"), flush: true)
    }

    func sendEnd() {
        exchange.requestCompleted()
        if chunked { return write(channel.allocator.buffer(staticString: "0\r\n\r\n"), flush: true) }
        flush()
    }

    func giveBack() { pool?.release(self) }

    var isWritable: Bool { channel.isWritable }

    func startTunnel(_ tunnel: Tunnel) -> Bool {
        self.tunnel = tunnel
        machine.switched()
        readGate.set(open: true, on: channel)
        return true
    }
    func setReading(_ on: Bool) { readGate.set(open: on, on: channel) }
    func close() {
        machine.close()
        channel.close(promise: nil)
    }

    /// Reused only when the machine finds it clean (see HTTP1UpstreamStateMachine).
    func responseEnded(requestComplete: Bool) {
        let verdict = machine.responseEnded(requestComplete: requestComplete, trailing: received.readableBytes > 0,
                                            announcedBodyWithheld: decoder.announcedBodyWithheld, mustClose: decoder.mustClose)
        if verdict == .reuse, channel.isActive {
            setReading(true)
            pool?.release(self)
        } else {
            channel.close(promise: nil)
        }
    }

    /// Bytes came from the upstream; false when they answer no request and
    /// the connection is closing (they are dropped, never read as HTTP).
    func bytesArrived() -> Bool {
        guard machine.bytesArrived() == .close else { return true }
        received = ByteBuffer()
        channel.close(promise: nil)
        return false
    }

    /// The channel closed (or was found closed when a request was to go out).
    func closed() {
        if machine.closed() { pool?.closed(self) }
        exchangeClosed()
    }
}

/// Reads an upstream HTTP/1.1 connection's responses from its bytes and
/// hands them to the connection; the end of a read batch and writability
/// changes pass straight to it, and its reads pass the connection's gate.
/// Holds its connection strongly: the pipeline is torn down when the
/// channel closes, which ends the cycle.
final class HTTP1UpstreamHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    let connection: HTTP1UpstreamConnection

    init(connection: HTTP1UpstreamConnection) { self.connection = connection }

    func handlerAdded(context: ChannelHandlerContext) { connection.context = context }

    func handlerRemoved(context: ChannelHandlerContext) { connection.context = nil }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if let tunnel = connection.tunnel { return tunnel.fromUpstream(unwrapInboundIn(data)) }
        guard connection.bytesArrived() else { return }
        connection.received.cumulate(unwrapInboundIn(data))
        do {
            while connection.machine.isExchanging, let part = try connection.decoder.next(&connection.received) {
                connection.received(consume part)
                // Switched: what followed the 101 already belongs to the other protocol.
                if let tunnel = connection.tunnel {
                    if connection.received.readableBytes > 0 { tunnel.fromUpstream(connection.received) }
                    connection.received = ByteBuffer()
                    return
                }
            }
        } catch {
            connection.received = ByteBuffer()
            connection.failed(.reset("upstream \(connection.upstream) sent a malformed response: \(error)",
                                     summary: "it sent a malformed response"), responseArrived: true)
        }
        // Bytes behind an answer that closed the connection answer no request.
        if !connection.machine.isExchanging || connection.received.readableBytes == 0 { connection.received = ByteBuffer() }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let tunnel = connection.tunnel {
            tunnel.close()
            connection.closed()
            return context.fireChannelInactive()
        }
        // A response read until close ends here; any other was cut short.
        do {
            if let end = try connection.decoder.inputClosed() { connection.received(end) }
        } catch {
            connection.failed(.reset("upstream \(connection.upstream) closed the connection mid-response"))
        }
        connection.closed()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        connection.failed(.reset("\(error)"))
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if let tunnel = connection.tunnel { tunnel.upstreamReadComplete() } else { connection.readComplete() }
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if let tunnel = connection.tunnel {
            if context.channel.isWritable { tunnel.upstreamWritable() }
        } else {
            connection.writabilityChanged()
        }
        context.fireChannelWritabilityChanged()
    }
}

extension HTTP1UpstreamConnection: TunnelEnd {
    func tunnelWrite(_ buffer: ByteBuffer) { write(buffer) }
    func flushTunnel() { flush() }
    var tunnelWritable: Bool { channel.isWritable }
    func setTunnelReading(_ on: Bool) { readGate.set(open: on, on: channel) }
    func closeTunnel() { channel.close(promise: nil) }
}
