import NIOCore
import NIOPosix

// The floor under any proxy on SwiftNIO, for scripts/bench: each client
// connection gets one upstream connection and bytes go across unread (no
// parsing, no routing, no pool, no log), on one event loop or LOOPS.
// Usage: NIOForwarder LISTEN_PORT UPSTREAM_PORT [LOOPS]

/// Copies what one channel reads to its peer, flushed once per read batch.
final class Forward: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    var peer: Channel?
    /// Read before the peer connected.
    var early: [ByteBuffer] = []

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = unwrapInboundIn(data)
        if let peer { peer.write(bytes, promise: nil) } else { early.append(bytes) }
    }

    func channelReadComplete(context: ChannelHandlerContext) { peer?.flush() }

    func channelInactive(context: ChannelHandlerContext) { peer?.close(promise: nil) }
}

let arguments = CommandLine.arguments
guard (3...4).contains(arguments.count), let listenPort = Int(arguments[1]), let upstreamPort = Int(arguments[2]),
      let loops = arguments.count == 4 ? Int(arguments[3]) : 1 else {
    fatalError("usage: NIOForwarder LISTEN_PORT UPSTREAM_PORT [LOOPS]")
}
let group = MultiThreadedEventLoopGroup(numberOfThreads: loops)
let server = try ServerBootstrap(group: group)
    .serverChannelOption(.backlog, value: 1024)
    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
    .childChannelInitializer { client in
        let fromClient = Forward()
        let fromUpstream = Forward()
        fromUpstream.peer = client
        return client.pipeline.addHandler(fromClient).flatMap {
            ClientBootstrap(group: client.eventLoop)
                .channelInitializer { $0.pipeline.addHandler(fromUpstream) }
                .connect(host: "127.0.0.1", port: upstreamPort)
                .map { upstream in
                    fromClient.peer = upstream
                    for bytes in fromClient.early { upstream.write(bytes, promise: nil) }
                    upstream.flush()
                }
        }
    }
    .bind(host: "127.0.0.1", port: listenPort).wait()
try server.closeFuture.wait()
