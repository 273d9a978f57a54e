import Logging
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix

/// Binds every configured listener: HTTP/1.1 and h2c by prior knowledge on the
/// same port (told apart by the connection preface). Every call is served on
/// its connection's event loop, upstream connections included.
public actor GatewayServer {
    private let config: GatewayConfig
    private let group: MultiThreadedEventLoopGroup
    private let pools: UpstreamPools
    private let modifiers: [any RequestModifier]
    private let logger: Logger
    private var channels: [Channel] = []

    /// `modifiers` run, in order, on every upstream request after the config's
    /// header rules. `logger` receives the access log (one line per call).
    public init(
        config: GatewayConfig, modifiers: [any RequestModifier] = [], logger: Logger = Logger(label: "gatewayd.access"),
        threads: Int = System.coreCount
    ) {
        self.config = config
        self.modifiers = modifiers
        var logger = logger
        logger.logLevel = Logger.Level(rawValue: config.logging.level.rawValue) ?? .info
        self.logger = logger
        self.group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        self.pools = UpstreamPools(group: group, upstreams: config.upstreams)
    }

    /// Binds all listeners; returns their bound addresses (port 0 resolved).
    public func start() async throws -> [SocketAddress] {
        let router = Router(config: config)
        var addresses: [SocketAddress] = []
        for listener in config.listeners {
            if listener.tls != nil { throw UpstreamError.unsupported("TLS listeners are not built yet (\(listener.address))") }
            let shared = ListenerContext(config: config, router: router, pools: pools, modifiers: modifiers,
                                         accessLog: AccessLog(logger: logger, enabled: config.logging.accessLog),
                                         scheme: "http")
            let protocols = listener.protocols
            let channel = try await ServerBootstrap(group: group)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .serverChannelOption(.backlog, value: 1024)
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        switch (protocols.contains(.http1), protocols.contains(.h2c)) {
                        case (true, true):
                            let detector = HTTPVersionDetector { channel, isHTTP2 in
                                try Self.configure(channel, http2: isHTTP2, shared: shared)
                            }
                            try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(detector))
                        case (false, true):
                            try Self.configure(channel, http2: true, shared: shared)
                        default:
                            try Self.configure(channel, http2: false, shared: shared)
                        }
                    }
                }
                .bind(host: listener.address.host, port: listener.address.port)
                .get()
            channels.append(channel)
            if let address = channel.localAddress { addresses.append(address) }
        }
        return addresses
    }

    static func configure(_ channel: Channel, http2: Bool, shared: ListenerContext) throws {
        let pipeline = channel.pipeline.syncOperations
        guard http2 else {
            try pipeline.configureHTTPServerPipeline(withErrorHandling: true)
            try pipeline.addHandler(ProxyHandler(shared: shared, isStream: false))
            return
        }
        var connection = NIOHTTP2Handler.ConnectionConfiguration()
        connection.initialSettings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: 256),
            HTTP2Setting(parameter: .maxHeaderListSize, value: shared.config.limits.maxHeaderBytes),
        ]
        _ = try pipeline.configureHTTP2Pipeline(
            mode: .server, connectionConfiguration: connection, streamConfiguration: .init()
        ) { stream in
            stream.eventLoop.makeCompletedFuture {
                try stream.pipeline.syncOperations.addHandler(HTTP2FramePayloadToHTTP1ServerCodec())
                try stream.pipeline.syncOperations.addHandler(ProxyHandler(shared: shared, isStream: true))
            }
        }
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
