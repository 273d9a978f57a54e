import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL

/// Keep-alive upstream connections owned by one event loop: a call is always
/// served by a connection on its own loop (no hops), and each loop may open
/// up to its share of the upstream's `max_connections`. Used only on `eventLoop`.
final class UpstreamPool {
    let eventLoop: EventLoop
    private let upstreams: [String: UpstreamConfig]
    private let tlsContexts: [String: NIOSSLContext]
    /// Per upstream, made at start: each call only looks one up (mutating
    /// dictionary values in place cost allocations on every call).
    private let slots: [String: Slot]
    /// HTTP/2 upstreams: one multiplexed connection per upstream per loop
    /// (being set up, or up); each call opens a stream on it.
    private var sessions: [String: EventLoopFuture<NIOHTTP2Handler.StreamMultiplexer>] = [:]
    private var sessionChannels: [ObjectIdentifier: Channel] = [:]
    /// A reload replaced this pool: nothing new is kept for reuse.
    private var retired = false

    init(eventLoop: EventLoop, upstreams: [UpstreamConfig], loops: Int, tlsContexts: [String: NIOSSLContext]) {
        self.tlsContexts = tlsContexts
        self.eventLoop = eventLoop
        self.upstreams = Dictionary(uniqueKeysWithValues: upstreams.map { ($0.name, $0) })
        slots = Dictionary(uniqueKeysWithValues: upstreams.map { ($0.name, Slot(limit: max(1, $0.maxConnections / max(1, loops)))) })
    }

    /// One upstream's connections on this loop: its share of `max_connections`.
    private final class Slot {
        let limit: Int
        var idle: [UpstreamConnection] = []
        var open = 0
        var waiters = CircularBuffer<EventLoopPromise<UpstreamConnection>>()
        init(limit: Int) { self.limit = limit }
    }

    /// An idle kept-alive connection, when there is one.
    func takeIdle(_ upstream: String) -> UpstreamConnection? {
        eventLoop.assertInEventLoop()
        guard let slot = slots[upstream] else { return nil }
        while let connection = slot.idle.popLast() {
            if connection.channel.isActive { return connection }
        }
        return nil
    }

    /// An idle connection, a new one, or a wait for one to be released.
    func acquire(_ upstream: UpstreamConfig) -> EventLoopFuture<UpstreamConnection> {
        if let connection = takeIdle(upstream.name) { return eventLoop.makeSucceededFuture(connection) }
        guard let url = upstream.url else {
            return eventLoop.makeFailedFuture(UpstreamError.unsupported("echo is answered in process"))
        }
        if upstream.http2 { return openStream(upstream, url: url) }
        let slot = slots[upstream.name]!
        if slot.open >= slot.limit {
            let promise = eventLoop.makePromise(of: UpstreamConnection.self)
            slot.waiters.append(promise)
            return promise.futureResult
        }
        slot.open += 1
        return connect(upstream, url: url)
    }

    private func openStream(_ upstream: UpstreamConfig, url: UpstreamURL) -> EventLoopFuture<UpstreamConnection> {
        let name = upstream.name
        let session = sessions[name] ?? connectHTTP2(upstream, url: url)
        sessions[name] = session
        return session.flatMap { multiplexer in
            multiplexer.createStreamChannel { stream in
                stream.eventLoop.makeCompletedFuture {
                    let connection = UpstreamConnection(channel: stream, upstream: name, isStream: true)
                    try stream.pipeline.syncOperations.addHandler(HTTP2FramePayloadToHTTP1ClientCodec(httpProtocol: url.isTLS ? .https : .http))
                    try stream.pipeline.syncOperations.addHandler(UpstreamStreamHandler(connection: connection))
                }
            }
        }.flatMapThrowing { stream in
            try stream.pipeline.syncOperations.handler(type: UpstreamStreamHandler.self).connection
        }.flatMapErrorThrowing { error in
            throw error as? UpstreamError ?? UpstreamError.refusedStream("\(url.authority): \(error)")
        }
    }

    /// h2c by prior knowledge for http URLs, h2 by ALPN for https ones.
    private func connectHTTP2(_ upstream: UpstreamConfig, url: UpstreamURL) -> EventLoopFuture<NIOHTTP2Handler.StreamMultiplexer> {
        let name = upstream.name
        return connectChannel(upstream, url: url) { pipeline in
            _ = try pipeline.configureHTTP2Pipeline(mode: .client, connectionConfiguration: .init(), streamConfiguration: .init()) {
                stream in stream.close()  // an upstream does not open streams towards us
            }
        }
        .flatMapThrowing { [self] channel in
            sessionChannels[ObjectIdentifier(channel)] = channel
            channel.closeFuture.whenComplete { [self] _ in
                sessions[name] = nil
                sessionChannels[ObjectIdentifier(channel)] = nil
            }
            return try channel.pipeline.syncOperations.handler(type: NIOHTTP2Handler.self).syncMultiplexer()
        }
        .flatMapError { [self] error in
            sessions[name] = nil
            return eventLoop.makeFailedFuture(error)
        }
    }

    /// A TCP connection on this loop with the upstream's connect timeout, TLS
    /// (when https, verifying `tls.server_name` or the host) and `protocolHandlers`.
    private func connectChannel(
        _ upstream: UpstreamConfig, url: UpstreamURL,
        protocolHandlers: @escaping @Sendable (ChannelPipeline.SynchronousOperations) throws -> Void
    ) -> EventLoopFuture<Channel> {
        let tls = tlsContexts[upstream.name]
        let serverName = upstream.tls.serverName ?? (url.host.isIPAddress ? nil : url.host)
        return ClientBootstrap(group: eventLoop)
            .connectTimeout(upstream.connectTimeout.timeAmount)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    if let tls { try pipeline.addHandler(NIOSSLClientHandler(context: tls, serverHostname: serverName)) }
                    try protocolHandlers(pipeline)
                }
            }
            .connect(host: url.host, port: url.port)
            .flatMapErrorThrowing { error in throw UpstreamError.connectFailure("\(url.authority): \(error)") }
    }

    private func connect(_ upstream: UpstreamConfig, url: UpstreamURL) -> EventLoopFuture<UpstreamConnection> {
        let name = upstream.name
        // Requests are written as bytes, checked where they are built (config
        // at load, modifiers' output in ProxyHandler), not again per write.
        return connectChannel(upstream, url: url) { _ in }
            .flatMapErrorThrowing { [slot = slots[name]!] error in
                slot.open -= 1
                throw error
            }
            .flatMapThrowing { channel in
                let connection = UpstreamConnection(channel: channel, upstream: name)
                connection.pool = self
                try channel.pipeline.syncOperations.addHandler(HTTP1UpstreamHandler(connection: connection))
                return connection
            }
    }

    func release(_ connection: UpstreamConnection) {
        eventLoop.assertInEventLoop()
        if retired { return connection.channel.close(promise: nil) }
        let slot = slots[connection.upstream]!
        if let waiter = slot.waiters.popFirst() {
            waiter.succeed(connection)
        } else {
            slot.idle.append(connection)
        }
    }

    /// Idle connections close now, busy ones when their call ends, HTTP/2
    /// sessions (whose streams cannot be counted from here) after `grace`.
    func retire(grace: TimeAmount) {
        eventLoop.assertInEventLoop()
        retired = true
        for slot in slots.values {
            for connection in slot.idle { connection.channel.close(promise: nil) }
            slot.idle = []
        }
        let sessions = Array(sessionChannels.values)
        if !sessions.isEmpty { eventLoop.scheduleTask(in: grace) { for channel in sessions { channel.close(promise: nil) } } }
    }

    func closed(_ connection: UpstreamConnection) {
        eventLoop.assertInEventLoop()
        let slot = slots[connection.upstream]!
        slot.idle.removeAll { $0 === connection }
        slot.open -= 1
        // A waiter can now open a connection of its own.
        if let waiter = slot.waiters.popFirst() {
            slot.open += 1
            if let upstream = upstreams[connection.upstream], let url = upstream.url {
                connect(upstream, url: url).cascade(to: waiter)
            }
        }
    }
}

/// One pool per event loop, created at start and never changed, so any loop
/// can find its own without locking. https upstreams' TLS contexts are built
/// once here and shared.
final class UpstreamPools: @unchecked Sendable {
    private let pools: [ObjectIdentifier: UpstreamPool]

    init(group: MultiThreadedEventLoopGroup, upstreams: [UpstreamConfig]) throws {
        var contexts: [String: NIOSSLContext] = [:]
        for upstream in upstreams where upstream.url?.isTLS == true {
            var configuration = TLSConfiguration.makeClientConfiguration()
            configuration.applicationProtocols = upstream.http2 ? ["h2"] : ["http/1.1"]
            if let caFile = upstream.tls.caFile { configuration.additionalTrustRoots = [.file(caFile)] }
            do {
                contexts[upstream.name] = try NIOSSLContext(configuration: configuration)
            } catch {
                throw ListenerError(message: "upstream \(upstream.name): cannot set up TLS: \(error)")
            }
        }
        let loops = Array(group.makeIterator())
        var pools: [ObjectIdentifier: UpstreamPool] = [:]
        for loop in loops {
            pools[ObjectIdentifier(loop)] = UpstreamPool(eventLoop: loop, upstreams: upstreams, loops: loops.count, tlsContexts: contexts)
        }
        self.pools = pools
    }

    func pool(for eventLoop: EventLoop) -> UpstreamPool {
        pools[ObjectIdentifier(eventLoop)]!
    }

    /// A reload replaced these pools.
    func retire(grace: TimeAmount) {
        for pool in pools.values { pool.eventLoop.execute { pool.retire(grace: grace) } }
    }
}

extension String {
    /// An IPv4 or IPv6 literal (which TLS SNI may not carry).
    var isIPAddress: Bool {
        var v4 = in_addr(), v6 = in6_addr()
        return inet_pton(AF_INET, self, &v4) == 1 || inet_pton(AF_INET6, self, &v6) == 1
    }
}
