import CoreMetrics
import Logging
import NIOCore
import NIOExtras
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOTLS
import Rewriter
import ServiceLifecycle
import Synchronization

/// Binds every configured listener: HTTP/1.1 and h2c by prior knowledge on the
/// same port (told apart by the connection preface), or TLS with ALPN
/// choosing h2 or http/1.1. Every call is served on its connection's event
/// loop, upstream connections included. `reload` swaps the config under
/// running listeners; `drain` stops them gracefully. A ServiceLifecycle
/// `Service`: run in a ServiceGroup, it serves until a graceful shutdown,
/// then drains.
public actor GatewayServer: Service {
    private var config: GatewayConfig
    private let group: any EventLoopGroup
    /// The group was made here (`threads:`), so it is shut down here too.
    private let ownsGroup: Bool
    private let modifiers: [any RequestModifier]
    private let validators: [any ResponseValidator]
    private let logger: Logger
    /// One per process: its per-loop buffers and its file outlive reloads.
    private nonisolated let accessLog: AccessLog
    /// What the gateway counts, labelled by route, upstream and status (the admin listener's `/metrics`).
    public nonisolated let metrics: GatewayMetrics
    /// Listening and not draining: what `/readyz` says.
    public nonisolated let status = ServingStatus()
    private var pools: UpstreamPools?
    /// Credentials and budget windows, by route name, across reloads.
    let routeState = RouteStateRegistry()
    /// Endpoint health and ejections, by upstream and endpoint, across reloads.
    private let upstreamStates = UpstreamStateRegistry()
    /// The filters' shared data, queues and metrics, across reloads.
    private lazy var filterState = FilterSharedState(factory: metrics.factory)
    private var healthChecker: HealthChecker?
    /// Where spans go while `tracing.export` is on (kept across reloads that leave it as it is).
    private var spanExporter: SpanExporter?
    /// The upstreams now served, for `upstreamsJSON` (read off the actor).
    nonisolated let servedStates = Mutex<[UpstreamState]>([])
    /// A route of the served config goes to the built-in echo (listed by `GET /upstreams` too).
    nonisolated let servesEcho = Mutex(false)
    /// Sockets from systemd socket activation, not yet used by a listener.
    private var inherited: InheritedSockets
    private var listeners: [ListenerKey: BoundListener] = [:]
    /// How upstream pools reach endpoints: TCP, or in process (`GatewayTesting`).
    private let connector: UpstreamConnector
    /// Served without sockets (`serveInProcess`): each listener's slot, by position.
    private var inProcess: [ListenerSlot]?
    /// `shutdown` ran: a second call (an embedder's, after ServiceLifecycle's) does nothing.
    private var shutDown = false

    /// What identifies a listener across reloads: the same address,
    /// protocols and TLS-or-not keep their socket.
    private struct ListenerKey: Hashable {
        var address: SocketAddressSpec
        var protocols: [ListenerConfig.HTTPProtocol]
        var tls: Bool
        /// Port 0 (any free port) names no address: such listeners are told
        /// apart by their position in the config.
        var position: Int?
        init(_ listener: ListenerConfig, position: Int) {
            address = listener.address
            protocols = listener.protocols
            tls = listener.tls != nil
            self.position = listener.address.port == 0 ? position : nil
        }
    }

    private struct BoundListener {
        let slot: ListenerSlot
        let channel: Channel
        let quiescing: ServerQuiescingHelper
    }

    /// `modifiers` run, in order, on every upstream request after the config's
    /// header rules; `validators` judge every answer after each route's own
    /// chain. The access log goes to standard error, `logging.access_log.path`,
    /// or `accessLines` (whole lines in the configured format) when given;
    /// `logger` receives the operational lines (each try of a call that retries);
    /// `metrics` the counters and histograms (swift-metrics' global factory
    /// when nil); calls are served on `group`'s event loops, which the caller
    /// owns. A listener whose address one of `inheritedSockets` is bound to
    /// uses it instead of binding (socket activation).
    public init(
        config: GatewayConfig, group: any EventLoopGroup, modifiers: [any RequestModifier] = [],
        validators: [any ResponseValidator] = [], logger: Logger = Logger(label: "gatewayd"),
        accessLines: (@Sendable ([UInt8]) -> Void)? = nil, metrics: (any MetricsFactory)? = nil,
        inheritedSockets: InheritedSockets = InheritedSockets()
    ) {
        self.init(config: config, group: group, ownsGroup: false, modifiers: modifiers, validators: validators, logger: logger,
                  accessLines: accessLines, metrics: metrics, inheritedSockets: inheritedSockets)
    }

    /// As above, on `threads` event loops of its own (one per core when nil),
    /// shut down by `shutdown()`.
    public init(
        config: GatewayConfig, modifiers: [any RequestModifier] = [], validators: [any ResponseValidator] = [],
        logger: Logger = Logger(label: "gatewayd"), accessLines: (@Sendable ([UInt8]) -> Void)? = nil,
        metrics: (any MetricsFactory)? = nil, threads: Int? = nil, inheritedSockets: InheritedSockets = InheritedSockets()
    ) {
        self.init(config: config, group: MultiThreadedEventLoopGroup(numberOfThreads: max(1, threads ?? System.coreCount)), ownsGroup: true,
                  modifiers: modifiers, validators: validators, logger: logger, accessLines: accessLines, metrics: metrics,
                  inheritedSockets: inheritedSockets)
    }

    /// On `group`, upstreams reached through `connector` (GatewayTesting's in-process ones).
    package init(config: GatewayConfig, group: any EventLoopGroup, modifiers: [any RequestModifier], validators: [any ResponseValidator],
                 logger: Logger, accessLines: (@Sendable ([UInt8]) -> Void)?, connector: UpstreamConnector) {
        self.init(config: config, group: group, ownsGroup: false, modifiers: modifiers, validators: validators, logger: logger,
                  accessLines: accessLines, metrics: nil, inheritedSockets: InheritedSockets(), connector: connector)
    }

    private init(
        config: GatewayConfig, group: any EventLoopGroup, ownsGroup: Bool, modifiers: [any RequestModifier],
        validators: [any ResponseValidator], logger: Logger, accessLines: (@Sendable ([UInt8]) -> Void)?,
        metrics: (any MetricsFactory)?, inheritedSockets: InheritedSockets, connector: UpstreamConnector = .tcp
    ) {
        self.connector = connector
        self.group = group
        self.ownsGroup = ownsGroup
        inherited = inheritedSockets
        self.metrics = GatewayMetrics(factory: metrics ?? MetricsSystem.factory)
        self.config = config
        self.modifiers = modifiers
        self.validators = validators
        self.logger = logger
        let format: AccessLine.Format = switch config.logging.format {
        case .text: .text
        case .json: .json
        case .logfmt: .logfmt
        }
        accessLog = AccessLog(group: group, format: format, sink: AccessLogSink(path: config.logging.accessLogPath, custom: accessLines))
    }

    /// Reopens the access log's file (SIGUSR1, after logrotate moved it).
    public nonisolated func reopenAccessLog() throws {
        try accessLog.sink.open()
    }

    /// Serves until a graceful shutdown, then drains for `limits.drain_timeout`
    /// and closes what is left.
    public func run() async throws {
        _ = try await start()
        try? await gracefulShutdown()
        await drain(timeout: config.limits.drainTimeout)
        try await shutdown()
    }

    /// Binds all listeners; returns their bound addresses (port 0 resolved),
    /// in the config's order.
    public func start() async throws -> [SocketAddress] {
        try await start(binding: true)
    }

    /// Everything `start` does but bind: connections come through `accept`.
    package func serveInProcess() async throws {
        _ = try await start(binding: false)
    }

    /// A connection made in process (a pipe, not a socket) served as if
    /// `listeners[listener]` had accepted it.
    package func accept(_ channel: any Channel, listener: Int = 0) async throws {
        guard let slots = inProcess, slots.indices.contains(listener) else {
            throw StartupError(message: "no listeners[\(listener)] served in process")
        }
        let slot = slots[listener]
        let (protocols, metrics) = (config.listeners[listener].protocols, metrics)
        try await channel.eventLoop.flatSubmit { ConnectionPipeline.start(channel, slot: slot, protocols: protocols, metrics: metrics) }.get()
    }

    private func start(binding: Bool) async throws -> [SocketAddress] {
        try accessLog.sink.open()
        let (contexts, store) = try makeContexts(config)
        routeState.commit(store)
        spanExporter = contexts.first?.spans
        pools = contexts.first?.pools
        checkHealth(pools)
        servesEcho.withLock { $0 = config.routes.contains { $0.upstream == UpstreamConfig.echoName } }
        guard binding else {
            inProcess = contexts.map(ListenerSlot.init)
            status.set(ready: true)
            return []
        }
        var addresses: [SocketAddress] = []
        // Every listener is tried: an operator learns of each address that cannot be used, not the first.
        var failures: [String] = []
        for (position, (listener, context)) in zip(config.listeners, contexts).enumerated() {
            do {
                let bound = try await bind(listener, context: context)
                listeners[ListenerKey(listener, position: position)] = bound
                if let address = bound.channel.localAddress { addresses.append(address) }
            } catch {
                failures.append("\(error)")
            }
        }
        guard failures.isEmpty else {
            for bound in listeners.values { try? await bound.channel.close() }
            listeners = [:]
            throw StartupError(message: failures.joined(separator: "\n"))
        }
        status.set(ready: true)
        return addresses
    }

    /// Serves `newConfig` from now on, atomically: every call that starts
    /// after the swap uses it, calls in flight finish on the old one.
    /// Listeners whose address, protocols and TLS-ness did not change keep
    /// their sockets; new ones are bound, removed ones drained. Throws (and
    /// changes nothing) when the new config cannot be served: a certificate
    /// that does not load, an address that cannot be bound.
    public func reload(_ newConfig: GatewayConfig) async throws {
        let (contexts, store) = try makeContexts(newConfig)
        var kept: [ListenerKey: ListenerContext] = [:]
        var added: [ListenerKey: BoundListener] = [:]
        do {
            // In process there is nothing to bind: the slots are swapped below.
            for (position, (listener, context)) in zip(newConfig.listeners, contexts).enumerated() where inProcess == nil {
                let key = ListenerKey(listener, position: position)
                if listeners[key] != nil {
                    kept[key] = context
                } else if listener.address.port != 0, listeners.keys.contains(where: { $0.address == listener.address }) {
                    // Its own socket holds the address: binding again could only say "in use".
                    throw StartupError(message: "listeners[\(position)] \(listener.address): its protocols or TLS changed, which a reload "
                        + "cannot apply to an address this gateway listens on (the old listener keeps serving); restart gatewayd to change them")
                } else {
                    added[key] = try await bind(listener, context: context)
                }
            }
        } catch {
            for bound in added.values { try? await bound.channel.close() }
            routeState.rollback(store)
            if let spans = contexts.first?.spans, spans !== spanExporter { await spans.stop(timeout: .zero) }
            throw error
        }
        routeState.commit(store)
        if let old = spanExporter, old !== contexts.first?.spans {
            // Calls still on the old config end within the drain timeout; their spans go out after them.
            let grace = newConfig.limits.drainTimeout
            Task {
                try? await Task.sleep(for: grace)
                await old.stop(timeout: .seconds(5))
            }
        }
        spanExporter = contexts.first?.spans
        for (key, context) in kept { listeners[key]!.slot.listener = context }
        if inProcess != nil { inProcess = contexts.map(ListenerSlot.init) }
        for (key, bound) in listeners where kept[key] == nil {
            bound.quiescing.initiateShutdown(promise: nil)
        }
        listeners = listeners.filter { kept[$0.key] != nil }.merging(added) { old, _ in old }
        pools?.retire(grace: newConfig.limits.drainTimeout.timeAmount)
        pools = contexts.first?.pools
        checkHealth(pools)
        servesEcho.withLock { $0 = newConfig.routes.contains { $0.upstream == UpstreamConfig.echoName } }
        config = newConfig
    }

    /// Stops accepting, asks every connection to finish (HTTP/1.1: the response
    /// in flight carries `Connection: close`, idle connections close; HTTP/2:
    /// GOAWAY), and waits up to `timeout` for them to close.
    /// Returns whether all closed in time.
    @discardableResult
    public func drain(timeout: Duration) async -> Bool {
        status.set(draining: true)
        let loop = group.next()
        let all = listeners.values.map { bound in
            let promise = loop.makePromise(of: Void.self)
            bound.quiescing.initiateShutdown(promise: promise)
            return promise.futureResult
        }
        let done = loop.makePromise(of: Bool.self)
        EventLoopFuture.andAllComplete(all, on: loop).whenComplete { _ in done.succeed(true) }
        loop.scheduleTask(in: timeout.timeAmount) { done.succeed(false) }
        return (try? await done.futureResult.get()) ?? false
    }

    /// Closes every listener and connection at once.
    public func shutdown() async throws {
        guard !shutDown else { return }
        shutDown = true
        status.set(ready: false)
        checkHealth(nil)
        for bound in listeners.values { try? await bound.channel.close() }
        listeners = [:]
        routeState.currentStore?.close()
        await spanExporter?.stop(timeout: .seconds(5))
        spanExporter = nil
        await accessLog.flushAll()
        if ownsGroup { try await group.shutdownGracefully() }
    }

    /// The health checks of `pools`' upstreams from now on (none when nil).
    private func checkHealth(_ pools: UpstreamPools?) {
        healthChecker?.stop()
        healthChecker = pools.map { HealthChecker(loop: group.next(), pools: $0, spans: spanExporter) }
        healthChecker?.start()
        servedStates.withLock { $0 = pools?.states.values.sorted { $0.name < $1.name } ?? [] }
    }

    /// One context per listener of `config`, sharing one router and one set
    /// of upstream pools, and the store client they use (for the caller to
    /// commit once they serve, or roll back).
    private func makeContexts(_ config: GatewayConfig) throws -> ([ListenerContext], RouteStateRegistry.StoreSwap) {
        var logger = logger
        logger.logLevel = Logger.Level(rawValue: config.logging.level.rawValue) ?? .info
        let store = try routeState.swapStore(config.store) { [group, metrics, logger] store in
            var storeLogger = Logger(label: "gatewayd.store")
            storeLogger.logLevel = logger.logLevel
            return try RedisClient(config: store, loop: group.next(), logger: storeLogger, factory: metrics.factory)
        }
        var spans: SpanExporter?
        do {
            if let export = config.tracing.export {
                if let current = spanExporter, current.config == export {
                    spans = current
                } else {
                    var spanLogger = Logger(label: "gatewayd.tracing")
                    spanLogger.logLevel = logger.logLevel
                    spans = try SpanExporter(config: export, servingLoops: Array(group.makeIterator()), logger: spanLogger, factory: metrics.factory)
                }
            }
            let router = Router(config: config, metrics: metrics, state: routeState)
            let pools = try UpstreamPools(group: group, upstreams: config.upstreams,
                                          states: upstreamStates.states(for: config.upstreams, logger: logger, factory: metrics.factory),
                                          connector: connector)
            let accessLog = config.logging.accessLog ? accessLog : nil
            let filters = config.filters.isEmpty ? nil
                : FilterHosts(config: config, pools: pools, loops: Array(group.makeIterator()), logger: logger, shared: filterState)
            let contexts = try config.listeners.map { listener in
                ListenerContext(config: config, router: router, pools: pools, modifiers: modifiers, validators: validators,
                                accessLog: accessLog, logger: logger, metrics: metrics,
                                tls: try listener.tls.map { try Self.tlsContext($0, protocols: listener.protocols) },
                                trustedProxies: listener.trustedProxies, filters: filters,
                                spans: spans)
            }
            return (contexts, store)
        } catch {
            routeState.rollback(store)
            if let spans, spans !== spanExporter { Task { await spans.stop(timeout: .zero) } }
            throw error
        }
    }

    private func bind(_ listener: ListenerConfig, context: ListenerContext) async throws -> BoundListener {
        let slot = ListenerSlot(context)
        let quiescing = ServerQuiescingHelper(group: group)
        let protocols = listener.protocols
        let metrics = metrics
        let channel: Channel
        do {
            let bootstrap = ServerBootstrap(group: group)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .serverChannelOption(.backlog, value: 1024)
                .serverChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(quiescing.makeServerChannelHandler(channel: channel))
                    }
                }
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { ConnectionPipeline.start($0, slot: slot, protocols: protocols, metrics: metrics) }
            if let fd = inherited.take(listener.address) {
                channel = try await bootstrap.withBoundSocket(fd).get()
            } else {
                channel = try await bootstrap.bind(host: listener.address.host, port: listener.address.port).get()
            }
        } catch {
            throw StartupError.cannotListen("", on: listener.address, error)
        }
        return BoundListener(slot: slot, channel: channel, quiescing: quiescing)
    }
}
