import CoreMetrics
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// Keep-alive upstream connections owned by one event loop: a call is always
/// served by a connection on its own loop (no hops), and each loop may open
/// up to its share of the upstream's `max_connections`. Used only on
/// `eventLoop` (its methods assert it), hence Sendable unchecked: other
/// threads only hand it to that loop.
final class UpstreamPool: @unchecked Sendable {
    let eventLoop: EventLoop
    private let upstreams: [String: UpstreamConfig]
    private let tlsContexts: [String: NIOSSLContext]
    private let connector: UpstreamConnector
    /// Per endpoint (by identity: hashing an upstream's name costs ~300
    /// instructions a lookup), made at start: a call only looks one up, and
    /// a connection keeps its own.
    private let slots: [ObjectIdentifier: Slot]
    /// Endpoint health and circuit-breaker counts, shared with the other loops.
    let states: [String: UpstreamState]
    /// HTTP/2 upstreams: one multiplexed connection per endpoint per loop
    /// (being set up, or up); each call opens a stream on it.
    private var sessions: [SessionKey: HTTP2PoolStateMachine<HTTP2UpstreamSession, Waiter>] = [:]
    private var sessionChannels: [ObjectIdentifier: Channel] = [:]

    private struct SessionKey: Hashable {
        var upstream: String
        var endpoint: Int
    }

    /// Each loop's share of an upstream's `max_connections` is split over its endpoints.
    init(eventLoop: EventLoop, upstreams: [UpstreamConfig], loops: Int, tlsContexts: [String: NIOSSLContext], states: [String: UpstreamState],
         connector: UpstreamConnector) {
        self.tlsContexts = tlsContexts
        self.connector = connector
        self.eventLoop = eventLoop
        self.states = states
        self.upstreams = Dictionary(uniqueKeysWithValues: upstreams.map { ($0.name, $0) })
        slots = Dictionary(uniqueKeysWithValues: upstreams.flatMap { upstream in
            let limit = max(1, upstream.maxConnections / max(1, loops) / max(1, upstream.endpoints.count))
            return (states[upstream.name]?.endpoints ?? []).map {
                (ObjectIdentifier($0), Slot(limit: limit, idleTimeout: upstream.idleTimeout.timeAmount))
            }
        })
    }

    /// Told whether it takes a connection handed to it: false when its call
    /// ended meanwhile (the pool then offers the connection to the next).
    typealias Waiter = (Result<any UpstreamConnection, any Error>) -> Bool
    typealias WaiterID = PoolStateMachine<HTTP1UpstreamConnection, Waiter>.WaiterID

    /// One endpoint's connections on this loop: its share of `max_connections`.
    final class Slot {
        var state: PoolStateMachine<HTTP1UpstreamConnection, Waiter>
        let idleTimeout: TimeAmount
        /// One sweep at a time closes connections idle past `idleTimeout`.
        var sweeping = false
        init(limit: Int, idleTimeout: TimeAmount) {
            state = PoolStateMachine(limit: limit)
            self.idleTimeout = idleTimeout
        }
    }

    /// An idle kept-alive connection to `endpoint`, when there is one.
    func takeIdle(_ endpoint: Endpoint, now: NIODeadline) -> HTTP1UpstreamConnection? {
        eventLoop.assertInEventLoop()
        guard let slot = slots[ObjectIdentifier(endpoint)] else { return nil }
        var stale: [HTTP1UpstreamConnection] = []
        let connection = slot.state.takeIdle(now: now, idleTimeout: slot.idleTimeout, stale: &stale) { $0.channel.isActive }
        for connection in stale { connection.channel.close(promise: nil) }
        return connection
    }

    /// What `acquire` did: a connection at once, or a wait to cancel if the call ends first.
    enum Acquisition {
        case ready(any UpstreamConnection)
        case waiting(WaiterID?)
    }

    /// An idle connection to `endpoint` (returned), or `waiter` is called
    /// later with a new one, one released by another call, or the failure.
    func acquire(_ upstream: UpstreamConfig, endpoint: Endpoint, waiter: @escaping Waiter) -> Acquisition {
        eventLoop.assertInEventLoop()
        if upstream.http2 {
            let key = SessionKey(upstream: upstream.name, endpoint: endpoint.index)
            switch sessions[key, default: HTTP2PoolStateMachine()].acquire(waiter, accepts: \.acceptsStreams) {
            case .use(let session):
                return .ready(HTTP2UpstreamStream(session: session, upstream: upstream.name))
            case .connect(let attempt):
                connectHTTP2(upstream, endpoint: endpoint, key: key, attempt: attempt)
            case .wait:
                break
            }
            return .waiting(nil)
        }
        let slot = slots[ObjectIdentifier(endpoint)]!
        var stale: [HTTP1UpstreamConnection] = []
        let action = slot.state.acquire(waiter, now: .now(), idleTimeout: slot.idleTimeout, stale: &stale) { $0.channel.isActive }
        for connection in stale { connection.channel.close(promise: nil) }
        switch action {
        case .use(let connection):
            return .ready(connection)
        case .wait(let id):
            return .waiting(id)
        case .connect:
            connect(upstream, endpoint: endpoint, for: waiter)
            return .waiting(nil)
        }
    }

    /// The call that waited ended: it leaves the queue.
    func cancel(_ id: WaiterID, endpoint: Endpoint) {
        eventLoop.assertInEventLoop()
        slots[ObjectIdentifier(endpoint)]?.state.cancel(id)
    }

    /// h2c by prior knowledge for http URLs, h2 by ALPN for https ones; the
    /// session goes to every call that waited for this attempt.
    private func connectHTTP2(_ upstream: UpstreamConfig, endpoint: Endpoint, key: SessionKey, attempt: UInt64) {
        let name = upstream.name
        let scheme = endpoint.url.isTLS ? "https" : "http"
        connectChannel(upstream, url: endpoint.url) { pipeline in
            try pipeline.addHandler(HTTP2UpstreamSession(upstream: name, scheme: scheme, endpoint: endpoint))
        }
        .assumeIsolated()
        .flatMapThrowing { [self] channel in
            let session = try channel.pipeline.syncOperations.handler(type: HTTP2UpstreamSession.self)
            sessionChannels[ObjectIdentifier(channel)] = channel
            channel.closeFuture.assumeIsolated().whenComplete { [self] _ in
                sessions[key]?.closed(session)
                sessionChannels[ObjectIdentifier(channel)] = nil
            }
            return session
        }
        .whenComplete { [self] result in
            switch result {
            case .success(let session):
                for waiter in sessions[key]?.connected(session, attempt: attempt) ?? [] {
                    _ = waiter(.success(HTTP2UpstreamStream(session: session, upstream: name)))
                }
            case .failure(let error):
                for waiter in sessions[key]?.connectFailed(attempt: attempt) ?? [] { _ = waiter(.failure(error)) }
            }
        }
    }

    /// A connection (TCP unless the pools were given another connector) on this loop with the upstream's connect timeout, TLS
    /// (when https, verifying `tls.server_name` or the host) and `protocolHandlers`.
    private func connectChannel(
        _ upstream: UpstreamConfig, url: UpstreamURL,
        protocolHandlers: @escaping @Sendable (ChannelPipeline.SynchronousOperations) throws -> Void
    ) -> EventLoopFuture<Channel> {
        let tls = tlsContexts[upstream.name]
        let serverName = upstream.tls.serverName ?? (url.host.isIPAddress ? nil : url.host)
        return connector.connect(url, eventLoop, upstream.connectTimeout.timeAmount) { channel in
            channel.eventLoop.makeCompletedFuture {
                let pipeline = channel.pipeline.syncOperations
                if let tls { try pipeline.addHandler(NIOSSLClientHandler(context: tls, serverHostname: serverName)) }
                try protocolHandlers(pipeline)
            }
        }
            .flatMapErrorThrowing { error in throw UpstreamError.connectFailure("\(url.authority): \(UpstreamError.connectReason(error))") }
    }

    /// Opens a connection to `endpoint` (already counted as open) for `waiter`.
    private func connect(_ upstream: UpstreamConfig, endpoint: Endpoint, for waiter: @escaping Waiter) {
        let name = upstream.name
        let slot = slots[ObjectIdentifier(endpoint)]!
        // Requests are written as bytes, checked where they are built (config
        // at load, a modifier's output before its call's first try), not again per write.
        connectChannel(upstream, url: endpoint.url) { _ in }
            .assumeIsolated()
            .flatMapThrowing { channel in
                let connection = HTTP1UpstreamConnection(channel: channel, upstream: name, endpoint: endpoint, slot: slot)
                connection.pool = self
                try channel.pipeline.syncOperations.addHandler(HTTP1UpstreamHandler(connection: connection))
                return connection
            }
            .whenComplete { [self] result in
                switch result {
                case .success(let connection):
                    if !waiter(.success(connection)) { release(connection) }
                case .failure(let error):
                    slot.state.connectFailed()
                    _ = waiter(.failure(error))
                }
            }
    }

    /// A connection finished its exchange: the next live waiter takes it, or it idles.
    func release(_ connection: HTTP1UpstreamConnection) {
        eventLoop.assertInEventLoop()
        let slot = connection.slot
        // A loop, not recursion: a waiter that declines passes it to the next.
        while true {
            switch slot.state.release(connection, now: .now()) {
            case .close(let connection):
                return connection.channel.close(promise: nil)
            case .park:
                return sweepLater(slot)
            case .handOver(let connection, let waiter):
                if waiter(.success(connection)) { return }
            }
        }
    }

    /// Closes connections idle past the upstream's idle_timeout, once per
    /// timeout while any idle (no timer per call or per connection).
    private func sweepLater(_ slot: Slot) {
        guard !slot.sweeping else { return }
        slot.sweeping = true
        eventLoop.assumeIsolated().scheduleTask(in: slot.idleTimeout) { [self] in
            slot.sweeping = false
            for connection in slot.state.expire(before: .now() - slot.idleTimeout) { connection.channel.close(promise: nil) }
            if slot.state.idleCount > 0 { sweepLater(slot) }
        }
    }

    /// Idle connections close now, busy ones when their call ends, HTTP/2
    /// sessions (whose streams cannot be counted from here) after `grace`.
    func retire(grace: TimeAmount) {
        eventLoop.assertInEventLoop()
        for slot in slots.values {
            for connection in slot.state.retire() { connection.channel.close(promise: nil) }
        }
        let sessions = Array(sessionChannels.values)
        if !sessions.isEmpty { eventLoop.scheduleTask(in: grace) { for channel in sessions { channel.close(promise: nil) } } }
    }

    func closed(_ connection: HTTP1UpstreamConnection) {
        eventLoop.assertInEventLoop()
        let slot = connection.slot
        // A waiter can now open a connection of its own.
        guard let waiter = slot.state.closed(connection) else { return }
        if let upstream = upstreams[connection.upstream] { connect(upstream, endpoint: connection.endpoint, for: waiter) }
    }
}

/// One pool per event loop, created at start and never changed, so any loop
/// can find its own without locking. https upstreams' TLS contexts are built
/// once here and shared.
final class UpstreamPools: @unchecked Sendable {
    private let pools: [ObjectIdentifier: UpstreamPool]

    /// `states`: each upstream's endpoint health (from the server's registry,
    /// so it outlives reloads; fresh when not given).
    init(group: any EventLoopGroup, upstreams: [UpstreamConfig], states: [String: UpstreamState]? = nil, connector: UpstreamConnector = .tcp) throws {
        let states = states ?? UpstreamStateRegistry().states(for: upstreams, logger: Logger(label: "gatewayd"),
                                                               factory: NOOPMetricsHandler.instance)
        var contexts: [String: NIOSSLContext] = [:]
        for upstream in upstreams where upstream.url?.isTLS == true {
            var configuration = TLSConfiguration.makeClientConfiguration()
            configuration.applicationProtocols = upstream.http2 ? ["h2"] : ["http/1.1"]
            if let caFile = upstream.tls.caFile { configuration.additionalTrustRoots = [.file(caFile)] }
            do {
                contexts[upstream.name] = try NIOSSLContext(configuration: configuration)
            } catch {
                throw StartupError(message: "upstream \(upstream.name): cannot set up TLS: \(error)")
            }
        }
        let loops = Array(group.makeIterator())
        var pools: [ObjectIdentifier: UpstreamPool] = [:]
        for loop in loops {
            pools[ObjectIdentifier(loop)] = UpstreamPool(eventLoop: loop, upstreams: upstreams, loops: loops.count, tlsContexts: contexts, states: states,
                                                        connector: connector)
        }
        self.pools = pools
        self.states = states
    }

    let states: [String: UpstreamState]

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
    var isIPAddress: Bool { AddressRange.bytes(of: self) != nil }
}
