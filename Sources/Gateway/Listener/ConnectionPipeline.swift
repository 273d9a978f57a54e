import NIOCore
import NIOSSL
import NIOTLS

/// How an accepted connection becomes HTTP/1.1 or HTTP/2: TLS with ALPN, or
/// on a cleartext listener its protocols (both: the first bytes tell), then
/// the protocol's one handler.
enum ConnectionPipeline {
    /// The child channel's initializer.
    static func start(_ channel: Channel, slot: ListenerSlot, protocols: [ListenerConfig.HTTPProtocol],
                      metrics: GatewayMetrics) -> EventLoopFuture<Void> {
        let listener = slot.listener
        metrics.connections.increment()
        channel.closeFuture.whenComplete { _ in metrics.connections.decrement() }
        // Until the protocol is known (preface read, TLS handshake and ALPN
        // done), nothing else times out a client that sends nothing.
        let start = channel.eventLoop.scheduleTask(in: listener.config.limits.headerTimeout.timeAmount) {
            channel.close(promise: nil)
        }
        let configure: @Sendable (Channel, Bool) throws -> Void = { channel, http2 in
            start.cancel()
            try Self.configure(channel, http2: http2, slot: slot)
        }
        if let tls = listener.tls {
            return channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls))
                try channel.pipeline.syncOperations.addHandler(ApplicationProtocolNegotiationHandler { result, channel in
                    channel.eventLoop.makeCompletedFuture { try configure(channel, result == .negotiated("h2")) }
                })
            }
        }
        return channel.eventLoop.makeCompletedFuture {
            switch (protocols.contains(.http1), protocols.contains(.h2c)) {
            case (true, true):
                try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(HTTPVersionDetector(configure: configure)))
            case (false, true):
                try configure(channel, true)
            default:
                try configure(channel, false)
            }
        }
    }

    static func configure(_ channel: Channel, http2: Bool, slot: ListenerSlot) throws {
        let pipeline = channel.pipeline.syncOperations
        guard http2 else {
            // Requests read and answers written as bytes by one handler: no
            // codec handlers, no pipeline hop per request part. A client that
            // stops sending (half-close) still gets its answers.
            try channel.syncOptions?.setOption(ChannelOptions.allowRemoteHalfClosure, value: true)
            try pipeline.addHandler(HTTP1ConnectionHandler(slot: slot, channel: channel))
            return
        }
        try pipeline.addHandler(HTTP2ServerHandler(slot: slot))
    }
}
