import CoreMetrics
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS

/// Binds every configured listener: HTTP/1.1 and h2c by prior knowledge on the
/// same port (told apart by the connection preface), or TLS with ALPN
/// choosing h2 or http/1.1. Every call is served on its connection's event
/// loop, upstream connections included.
public actor GatewayServer {
    private let config: GatewayConfig
    private let group: MultiThreadedEventLoopGroup
    private let modifiers: [any RequestModifier]
    private let validators: [any ResponseValidator]
    private let logger: Logger
    private let metrics: GatewayMetrics
    private var channels: [Channel] = []

    /// `modifiers` run, in order, on every upstream request after the config's
    /// header rules; `validators` judge every answer after each route's own
    /// chain. `logger` receives the access log (one line per call);
    /// `metrics` the counters and histograms (swift-metrics' global factory
    /// when nil).
    public init(
        config: GatewayConfig, modifiers: [any RequestModifier] = [], validators: [any ResponseValidator] = [],
        logger: Logger = Logger(label: "gatewayd.access"), metrics: (any MetricsFactory)? = nil, threads: Int = System.coreCount
    ) {
        self.metrics = GatewayMetrics(factory: metrics ?? MetricsSystem.factory)
        self.config = config
        self.modifiers = modifiers
        self.validators = validators
        var logger = logger
        logger.logLevel = Logger.Level(rawValue: config.logging.level.rawValue) ?? .info
        self.logger = logger
        self.group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
    }

    /// Binds all listeners; returns their bound addresses (port 0 resolved).
    public func start() async throws -> [SocketAddress] {
        let router = Router(config: config, metrics: metrics)
        let pools = try UpstreamPools(group: group, upstreams: config.upstreams)
        var addresses: [SocketAddress] = []
        for listener in config.listeners {
            let tls = try listener.tls.map { try Self.tlsContext($0, protocols: listener.protocols) }
            let shared = ListenerContext(config: config, router: router, pools: pools, modifiers: modifiers, validators: validators,
                                         accessLog: AccessLog(logger: logger, enabled: config.logging.accessLog), metrics: metrics,
                                         scheme: tls == nil ? "http" : "https")
            let protocols = listener.protocols
            let channel = try await ServerBootstrap(group: group)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .serverChannelOption(.backlog, value: 1024)
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { channel in
                    // Until the protocol is known (preface read, TLS handshake and ALPN
                    // done), nothing else times out a client that sends nothing.
                    let start = channel.eventLoop.scheduleTask(in: shared.config.limits.headerTimeout.timeAmount) {
                        channel.close(promise: nil)
                    }
                    let configure: @Sendable (Channel, Bool) throws -> Void = { channel, http2 in
                        start.cancel()
                        try Self.configure(channel, http2: http2, shared: shared)
                    }
                    if let tls {
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
                .bind(host: listener.address.host, port: listener.address.port)
                .get()
            channels.append(channel)
            if let address = channel.localAddress { addresses.append(address) }
        }
        return addresses
    }

    /// The listener's certificate and key, read once; ALPN offers h2 and/or
    /// http/1.1 as `protocols` says.
    static func tlsContext(_ tls: ListenerConfig.TLS, protocols: [ListenerConfig.HTTPProtocol]) throws -> NIOSSLContext {
        do {
            let chain = try NIOSSLCertificate.fromPEMFile(tls.certificate).map { NIOSSLCertificateSource.certificate($0) }
            let key = try NIOSSLPrivateKey(file: tls.privateKey, format: .pem)
            var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: .privateKey(key))
            configuration.applicationProtocols = (protocols.contains(.h2) ? ["h2"] : []) + (protocols.contains(.http1) ? ["http/1.1"] : [])
            return try NIOSSLContext(configuration: configuration)
        } catch {
            throw ListenerError(message: "TLS listener: cannot use certificate \(tls.certificate) / key \(tls.privateKey): \(error)")
        }
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
        // swift-nio-http2's own connection manager: GOAWAY once idle for
        // `idle_timeout`; a keepalive PING every `idle_timeout` closes a peer
        // that stops answering (one that ignored the GOAWAY, or vanished).
        let idleTime = shared.config.limits.idleTimeout.timeAmount
        let manager = NIOHTTP2ServerConnectionManagementHandler(
            eventLoop: channel.eventLoop,
            configuration: .init(maxIdleTime: idleTime, maxAge: nil, maxGraceTime: idleTime,
                                 keepalive: .init(pingInterval: idleTime, ackTimeout: min(idleTime, .seconds(20)))))
        _ = try pipeline.configureHTTP2Pipeline(
            mode: .server, connectionConfiguration: connection, streamConfiguration: .init(), streamDelegate: manager.http2StreamDelegate
        ) { stream in
            stream.eventLoop.makeCompletedFuture {
                try stream.pipeline.syncOperations.addHandler(HTTP2FramePayloadToHTTP1ServerCodec())
                try stream.pipeline.syncOperations.addHandler(ProxyHandler(shared: shared, isStream: true))
            }
        }
        try pipeline.addHandler(manager)
        // Added after the preface or the TLS handshake, the manager would never
        // see channelActive, which starts its idle and keepalive timers.
        if channel.isActive { try pipeline.context(handlerType: NIOHTTP2Handler.self).fireChannelActive() }
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

/// A listener that cannot start (address in use, unreadable certificate).
public struct ListenerError: Error, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}
