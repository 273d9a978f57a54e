import Logging
import NIOSSL
import Synchronization

/// What every connection of one listener shares: immutable config, the
/// router built from it, the per-loop upstream pools, the embedder's hooks.
final class ListenerContext: Sendable {
    let config: GatewayConfig
    let router: Router
    let pools: UpstreamPools
    /// Each route's upstream state (nil: the echo upstream), by `Route.index`:
    /// a call finds it without hashing the upstream's name.
    let routeUpstreams: [UpstreamState?]
    let modifiers: [any RequestModifier]
    let validators: [any ResponseValidator]
    /// An embedder's validator reads response bodies: every route holds them.
    let validatorsReadBodies: Bool
    /// Nil when `logging.access_log` is off.
    let accessLog: AccessLog?
    /// The operational log (refresh warnings, filter failures).
    let logger: Logger
    /// One line per judged try, under `gatewayd.tries`.
    let tryLogger: Logger
    let metrics: GatewayMetrics
    /// `http` or `https`: what X-Forwarded-Proto says.
    let scheme: String
    /// The listener's `forwarded.trust`.
    let trustedProxies: [AddressRange]
    /// The listener's TLS (certificate files read at load or reload).
    let tls: NIOSSLContext?
    /// Each event loop's filter VMs (nil: the config has no filters).
    let filters: FilterHosts?
    /// Where sampled calls' spans go (nil: `tracing.export` is off).
    let spans: SpanExporter?

    /// The OpenAPI document served at `openapi.path` (nil: none is).
    let openAPIDocument: [UInt8]?

    init(config: GatewayConfig, router: Router, pools: UpstreamPools, modifiers: [any RequestModifier],
         validators: [any ResponseValidator], accessLog: AccessLog?, logger: Logger, metrics: GatewayMetrics, tls: NIOSSLContext?,
         trustedProxies: [AddressRange] = [], filters: FilterHosts? = nil, spans: SpanExporter? = nil) {
        self.tls = tls
        self.trustedProxies = trustedProxies
        self.filters = filters
        self.spans = spans
        scheme = tls == nil ? "http" : "https"
        self.metrics = metrics
        self.validators = validators
        validatorsReadBodies = validators.contains(where: \.readsBody)
        self.config = config
        openAPIDocument = config.openapi.path.map { _ in OpenAPIDocument.json(config, file: config.openapi.file) }
        self.router = router
        self.pools = pools
        routeUpstreams = router.routes.map { pools.states[$0.upstream.name] }
        self.modifiers = modifiers
        self.accessLog = accessLog
        self.logger = logger
        var tryLogger = Logger(label: "gatewayd.tries")
        tryLogger.logLevel = logger.logLevel
        self.tryLogger = tryLogger
    }
}

/// Where a listener's connections find the current context: a reload
/// replaces it, and each call takes it when its request head arrives, so a
/// call in flight finishes on the config it started with.
final class ListenerSlot: Sendable {
    private let current: Mutex<ListenerContext>

    init(_ context: ListenerContext) { current = Mutex(context) }

    var listener: ListenerContext {
        get { current.withLock { $0 } }
        set { current.withLock { $0 = newValue } }
    }
}
