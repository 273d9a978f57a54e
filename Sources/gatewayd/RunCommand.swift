import Foundation
import ArgumentParser
import Gateway
import Logging
import Metrics
import NIOCore
import NIOPosix
import Prometheus
import ServiceLifecycle
import UnixSignals

struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run", abstract: "Run the gateway.",
        discussion: """
            Serves until SIGTERM or SIGINT, then drains. SIGHUP reloads the config; SIGUSR1 \
            reopens the access log's file. Under systemd (Type=notify) it reports READY, \
            RELOADING, STOPPING and the watchdog. Exits 0 after a clean stop, 1 when the config \
            or a listener cannot be used.

            Example: gatewayd run -c /etc/gatewayd/gatewayd.yaml --event-loops 2
            """)

    @OptionGroup var options: ConfigOption

    @Option(help: "Event loops (threads) serving calls; on a few shared cores one loop may beat two. Default: one per core.")
    var eventLoops: Int?

    func validate() throws {
        if let eventLoops, eventLoops < 1 { throw ValidationError("--event-loops must be at least 1, found \(eventLoops)") }
    }

    func run() async throws {
        let loaded = try options.load()
        let config = loaded.config
        let format = config.logging.format
        LoggingSystem.bootstrap { label in
            switch format {
            case .text: StreamLogHandler.standardError(label: label)
            case .json: StructuredLogHandler(label: label, format: .json)
            case .logfmt: StructuredLogHandler(label: label, format: .logfmt)
            }
        }
        var logger = Logger(label: "gatewayd")
        logger.logLevel = Logger.Level(rawValue: config.logging.level.rawValue) ?? .info
        let registry = PrometheusCollectorRegistry()
        // Metrics are read only through the admin endpoint: without one, none are kept.
        let factory: any MetricsFactory = config.admin == nil ? NOOPMetricsHandler.instance : PrometheusMetricsFactory(registry: registry)
        MetricsSystem.bootstrap(factory)

        let eventLoopGroup = MultiThreadedEventLoopGroup(numberOfThreads: eventLoops ?? System.coreCount)
        // systemd socket activation: listeners take the sockets bound to their addresses.
        let server = GatewayServer(config: config, group: eventLoopGroup, logger: logger, metrics: factory,
                                   inheritedSockets: .fromEnvironment(ProcessInfo.processInfo.environment))
        let notifier = SystemdNotifier()
        let reloader = Reloader(file: options.config, loaded: loaded, server: server, notifier: notifier, logger: logger)
        let admin = AdminServer(endpoints: .init(
            status: server.status, metrics: { MetricHelp.adding(to: registry.emitToBuffer()) }, config: { reloader.redactedConfig },
            routes: { RouteTable.describe(reloader.current) }, upstreams: { server.upstreamsJSON() }, store: { server.storeJSON() },
            openapi: { OpenAPIDocument.json(reloader.current, file: reloader.current.openapi.file) },
            reload: { await reloader.reload(trigger: "POST /reload") },
            purgeCache: { server.purgeCache(route: $0, uri: $1) },
            token: { reloader.current.admin?.token }))
        let operatorSignals = await UnixSignalsSequence(trapping: .sighup, .sigusr1)
        var services: [any Service] = [SignalService(operatorSignals: operatorSignals, reloader: reloader, server: server, logger: logger)]
        if let interval = notifier.watchdogInterval { services.append(WatchdogService(notifier: notifier, interval: interval)) }
        // Stopped in reverse order: the listeners drain first, while the admin
        // endpoint still answers (readiness 503 during the drain).
        if let address = config.admin?.address { services.append(AdminService(admin: admin, address: address, logger: logger)) }
        services.append(ServingService(server: server, reloader: reloader, notifier: notifier, logger: logger))
        var configuration = ServiceGroupConfiguration(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        // The drain is bounded by limits.drain_timeout; this bounds everything else a stop does.
        configuration.maximumGracefulShutdownDuration = config.limits.drainTimeout + .seconds(10)
        try await ServiceGroup(configuration: configuration).run()
        try await eventLoopGroup.shutdownGracefully()
    }
}

/// The listeners and their upstream pools: up until a graceful stop, then drained.
struct ServingService: Service {
    let server: GatewayServer
    let reloader: Reloader
    let notifier: SystemdNotifier
    let logger: Logger

    func run() async throws {
        let config = reloader.current
        let addresses = try await server.start()
        for (listener, address) in zip(config.listeners, addresses) {
            logger.notice("gatewayd \(GatewayVersion.current) listening on \(listener.tls == nil ? "http" : "https")://\(address.hostAndPort)")
        }
        notifier.ready(status: "serving")
        StartupPages.release()
        try? await gracefulShutdown()
        notifier.stopping()
        let timeout = reloader.current.limits.drainTimeout
        logger.notice("draining: waiting up to \(timeout) for calls in flight")
        let drained = await server.drain(timeout: timeout)
        if !drained { logger.warning("drain timeout passed: closing the connections still open") }
        try await server.shutdown()
        logger.notice("stopped")
    }
}

/// The admin endpoint, until the listeners have drained.
struct AdminService: Service {
    let admin: AdminServer
    let address: SocketAddressSpec
    let logger: Logger

    func run() async throws {
        let bound = try await admin.start(on: address)
        logger.notice("admin endpoint on http://\(address.host):\(bound.port ?? 0)")
        try? await gracefulShutdown()
        try await admin.shutdown()
    }
}
