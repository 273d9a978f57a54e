import NIOCore

/// One side of a tunnel: a connection that carries raw bytes after
/// `101 Switching Protocols`.
protocol TunnelEnd: AnyObject {
    /// Writes bytes from the other side (flushed by `flushTunnel`).
    func tunnelWrite(_ buffer: ByteBuffer)
    func flushTunnel()
    var tunnelWritable: Bool { get }
    /// Back-pressure: stop (or resume) reading while the other side cannot take more.
    func setTunnelReading(_ on: Bool)
    func closeTunnel()
}

/// An upgraded call (a WebSocket, say): the client's connection and the
/// upstream's, joined byte for byte both ways. Neither side is read faster
/// than the other is written; silence both ways for `idleTimeout` closes
/// it; when either side closes, both do, and the call's access line is
/// written once (bytes each way, duration).
final class Tunnel {
    private let client: any TunnelEnd
    private let upstream: any TunnelEnd
    private(set) var bytesFromClient = 0
    private(set) var bytesFromUpstream = 0
    private var lastActivity = NIODeadline.now()
    private var closed = false
    private let ended: (Tunnel) -> Void

    init(client: any TunnelEnd, upstream: any TunnelEnd, idleTimeout: TimeAmount, on eventLoop: any EventLoop,
         ended: @escaping (Tunnel) -> Void) {
        self.client = client
        self.upstream = upstream
        self.ended = ended
        watchIdle(idleTimeout, on: eventLoop)
    }

    func fromClient(_ buffer: ByteBuffer) { forward(buffer, from: client, to: upstream, counting: &bytesFromClient) }

    func fromUpstream(_ buffer: ByteBuffer) { forward(buffer, from: upstream, to: client, counting: &bytesFromUpstream) }

    /// `sender` is read no faster than `receiver` is written.
    private func forward(_ buffer: ByteBuffer, from sender: any TunnelEnd, to receiver: any TunnelEnd, counting count: inout Int) {
        guard !closed else { return }
        count += buffer.readableBytes
        lastActivity = .now()
        receiver.tunnelWrite(buffer)
        if !receiver.tunnelWritable { sender.setTunnelReading(false) }
    }

    /// A read batch ended on one side: what it brought goes out on the other.
    func clientReadComplete() { upstream.flushTunnel() }
    func upstreamReadComplete() { client.flushTunnel() }

    /// One side can take more again: the other side is read again.
    func clientWritable() { upstream.setTunnelReading(true) }
    func upstreamWritable() { client.setTunnelReading(true) }

    /// Either side closed (or went silent too long): both close, logged once.
    func close() {
        guard !closed else { return }
        closed = true
        client.flushTunnel()
        upstream.flushTunnel()
        client.closeTunnel()
        upstream.closeTunnel()
        ended(self)
    }

    private func watchIdle(_ idleTimeout: TimeAmount, on eventLoop: any EventLoop) {
        eventLoop.assumeIsolated().scheduleTask(deadline: lastActivity + idleTimeout) { [weak self] in
            guard let self, !closed else { return }
            if NIODeadline.now() - lastActivity >= idleTimeout { return close() }
            watchIdle(idleTimeout, on: eventLoop)
        }
    }
}
