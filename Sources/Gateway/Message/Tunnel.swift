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
    /// Both ends, until the tunnel closes: each end holds the tunnel too, and
    /// `ended` holds the client's exchange, so closing lets go of them all
    /// (the cycle each tunnel otherwise leaked).
    private var ends: (client: any TunnelEnd, upstream: any TunnelEnd)?
    private(set) var bytesFromClient = 0
    private(set) var bytesFromUpstream = 0
    private var lastActivity = NIODeadline.now()
    private var ended: ((Tunnel) -> Void)?
    /// The idle watch's next wake-up: cancelled when the tunnel closes, so a
    /// closed tunnel leaves no timer (with its closure) in its loop's queue.
    private var idleCheck: Scheduled<Void>?

    init(client: any TunnelEnd, upstream: any TunnelEnd, idleTimeout: TimeAmount, on eventLoop: any EventLoop,
         ended: @escaping (Tunnel) -> Void) {
        ends = (client, upstream)
        self.ended = ended
        watchIdle(idleTimeout, on: eventLoop)
    }

    var isClosed: Bool { ends == nil }

    func fromClient(_ buffer: ByteBuffer) {
        guard let ends else { return }
        forward(buffer, from: ends.client, to: ends.upstream, counting: &bytesFromClient)
    }

    func fromUpstream(_ buffer: ByteBuffer) {
        guard let ends else { return }
        forward(buffer, from: ends.upstream, to: ends.client, counting: &bytesFromUpstream)
    }

    /// `sender` is read no faster than `receiver` is written.
    private func forward(_ buffer: ByteBuffer, from sender: any TunnelEnd, to receiver: any TunnelEnd, counting count: inout Int) {
        count += buffer.readableBytes
        lastActivity = .now()
        receiver.tunnelWrite(buffer)
        if !receiver.tunnelWritable { sender.setTunnelReading(false) }
    }

    /// What the client sent before the switch (after its request head, or
    /// before the upstream's answer) goes through first, as one read batch.
    func fromClientEarly(_ buffers: [ByteBuffer]) {
        let early = buffers.filter { $0.readableBytes > 0 }
        guard !early.isEmpty else { return }
        for buffer in early { fromClient(buffer) }
        clientReadComplete()
    }

    /// A read batch ended on one side: what it brought goes out on the other.
    func clientReadComplete() { ends?.upstream.flushTunnel() }
    func upstreamReadComplete() { ends?.client.flushTunnel() }

    /// One side can take more again: the other side is read again.
    func clientWritable() { ends?.upstream.setTunnelReading(true) }
    func upstreamWritable() { ends?.client.setTunnelReading(true) }

    /// Either side closed (or went silent too long): both close, logged once.
    func close() {
        guard let ends = ends.take() else { return }
        ends.client.flushTunnel()
        ends.upstream.flushTunnel()
        ends.client.closeTunnel()
        ends.upstream.closeTunnel()
        idleCheck.take()?.cancel()
        ended.take()?(self)
    }

    private func watchIdle(_ idleTimeout: TimeAmount, on eventLoop: any EventLoop) {
        idleCheck = eventLoop.assumeIsolated().scheduleTask(deadline: lastActivity + idleTimeout) { [weak self] in
            guard let self, !isClosed else { return }
            if NIODeadline.now() - lastActivity >= idleTimeout { return close() }
            watchIdle(idleTimeout, on: eventLoop)
        }
    }
}
