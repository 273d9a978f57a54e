import NIOCore
import NIOHTTP1
import NIOPosix

/// Binds every configured listener and serves it. HTTP/1.1 only so far.
public actor GatewayServer {
    private let config: GatewayConfig
    private let group: MultiThreadedEventLoopGroup
    private var channels: [Channel] = []

    public init(config: GatewayConfig, threads: Int = System.coreCount) {
        self.config = config
        self.group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
    }

    /// Binds all listeners; returns their bound addresses (port 0 resolved).
    public func start() async throws -> [SocketAddress] {
        let router = Router(routes: config.routes)
        let config = self.config
        var addresses: [SocketAddress] = []
        for listener in config.listeners {
            let channel = try await ServerBootstrap(group: group)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                        try channel.pipeline.syncOperations.addHandler(HTTP1Handler(config: config, router: router))
                    }
                }
                .bind(host: listener.address.host, port: listener.address.port)
                .get()
            channels.append(channel)
            if let address = channel.localAddress { addresses.append(address) }
        }
        return addresses
    }

    /// Waits until every listener is closed.
    public func wait() async throws {
        for channel in channels { try await channel.closeFuture.get() }
    }

    public func shutdown() async throws {
        for channel in channels { try? await channel.close() }
        try await group.shutdownGracefully()
    }
}
