import Rewriter

/// The whole configuration, validated. Built by `ConfigLoader` from YAML, or
/// directly by an embedding program.
public struct GatewayConfig: Sendable {
    public var listeners: [ListenerConfig]
    public var admin: AdminConfig?
    public var limits: Limits
    /// Declared upstreams in file order; `echo` is built in and never listed.
    public var upstreams: [UpstreamConfig]
    public var routes: [RouteConfig]
    public var logging: LoggingConfig
    public var tracing = TracingConfig()
    /// `filters`: the Proxy-Wasm filters a route may name.
    public var filters: [FilterConfig] = []
    /// `default_filters`: what a route without `filters` runs.
    public var defaultFilters: [String] = []
    /// `store`: the state a fleet of gatewayd processes shares (`scope: fleet`).
    public var store: StoreConfig?
    /// `openapi`: the generated document's own description.
    public var openapi = OpenAPIConfig()
    /// `cache`: the memory the routes' stored answers share.
    public var cache = CacheConfig()

    public init(
        listeners: [ListenerConfig], admin: AdminConfig? = nil, limits: Limits = Limits(),
        upstreams: [UpstreamConfig] = [], routes: [RouteConfig] = [], logging: LoggingConfig = LoggingConfig()
    ) {
        self.listeners = listeners
        self.admin = admin
        self.limits = limits
        self.upstreams = upstreams
        self.routes = routes
        self.logging = logging
    }

    /// The filters `route` runs, in order: its own list, else the default one.
    public func filters(of route: RouteConfig) -> [FilterConfig] {
        (route.filters ?? defaultFilters).compactMap { name in filters.first { $0.name == name } }
    }

    public func upstream(named name: String) -> UpstreamConfig? {
        name == UpstreamConfig.echoName ? .echo : upstreams.first { $0.name == name }
    }
}

/// `tracing`: W3C Trace Context (traceparent / tracestate) for every call.
/// `propagate`: a valid traceparent goes upstream with a new span id for the
/// gateway's hop; `start`: a call without a valid one starts a trace. Off by
/// default: the fields then pass through as any other.
public struct TracingConfig: Sendable, Hashable {
    public var propagate = false
    public var start = false
    /// `export.otlp`: the spans of sampled calls go to an OpenTelemetry collector.
    public var export: SpanExportConfig?
    public init(propagate: Bool = false, start: Bool = false, export: SpanExportConfig? = nil) {
        self.propagate = propagate
        self.start = start
        self.export = export
    }
    public var isOn: Bool { propagate || start }
}

/// `tracing.export.otlp`: where and how spans are sent (OTLP 1.x over
/// HTTP/1.1 as protobuf, or gRPC over HTTP/2), the share of new traces
/// sampled, and the `service.name` they carry.
public struct SpanExportConfig: Sendable, Hashable {
    public enum Transport: String, Sendable, CaseIterable {
        case httpProtobuf = "http/protobuf"
        case grpc
    }

    /// The collector; for http/protobuf a URL without a path posts to `/v1/traces`.
    public var endpoint: UpstreamURL
    public var transport = Transport.httpProtobuf
    /// Of the traces that start here; a propagated trace keeps its caller's sampled flag.
    public var sampleRatio = 1.0
    public var serviceName = "gatewayd"
    /// Sent with every export (a collector's API key).
    public var headers = HeaderList()
    /// An export unanswered this long fails, and its spans are dropped.
    public var timeout = Duration.seconds(10)

    public init(endpoint: UpstreamURL) { self.endpoint = endpoint }
}

public struct LoggingConfig: Sendable, Hashable {
    public enum Level: String, Sendable, CaseIterable { case trace, debug, info, notice, warning, error, critical }
    /// `text`: swift-log's default lines; `json`: one object per line; `logfmt`: key=value pairs.
    public enum Format: String, Sendable, CaseIterable { case text, json, logfmt }
    /// One line per call (client, route, upstream, status, bytes, timings, tries, request id).
    public var accessLog: Bool
    /// The access log's file (nil: standard error). Chosen at start; SIGUSR1 reopens it.
    public var accessLogPath: String?
    public var level: Level
    /// Chosen at start; a reload does not change it.
    public var format: Format
    public init(accessLog: Bool = true, accessLogPath: String? = nil, level: Level = .info, format: Format = .text) {
        self.format = format
        self.accessLog = accessLog
        self.accessLogPath = accessLogPath
        self.level = level
    }
}

public struct SocketAddressSpec: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    public var isLoopback: Bool { host == "localhost" || host == "::1" || host.hasPrefix("127.") }
}

public struct ListenerConfig: Sendable, Hashable {
    public enum HTTPProtocol: String, Sendable, CaseIterable { case http1, h2c, h2 }
    public struct TLS: Sendable, Hashable {
        public var certificate: String
        public var privateKey: String
        public init(certificate: String, privateKey: String) {
            self.certificate = certificate
            self.privateKey = privateKey
        }
    }

    public var address: SocketAddressSpec
    public var protocols: [HTTPProtocol]
    public var tls: TLS?
    /// `forwarded.trust`: peers whose X-Forwarded-* are kept and appended
    /// to, and whose X-Forwarded-For names the client; from any other peer
    /// they are replaced (docs/security.md).
    public var trustedProxies: [AddressRange] = []

    public init(address: SocketAddressSpec, protocols: [HTTPProtocol] = [.http1, .h2c], tls: TLS? = nil) {
        self.address = address
        self.protocols = protocols
        self.tls = tls
    }
}

public struct AdminConfig: Sendable, Hashable {
    public var address: SocketAddressSpec
    /// Whether a non-loopback address is allowed (it then needs `token`).
    public var allowRemote: Bool
    /// When set, `/config`, `/routes` and `/reload` need `Authorization: Bearer <token>`.
    public var token: String?
    public init(address: SocketAddressSpec, allowRemote: Bool = false, token: String? = nil) {
        self.address = address
        self.allowRemote = allowRemote
        self.token = token
    }
}

public struct Limits: Sendable, Hashable {
    public var maxHeaderBytes: Int
    /// A request body the gateway buffers (rewrite, retry): past it, 413.
    public var maxBodyBytes: Int
    /// A response held whole for body validators: past it, it is let
    /// through unvalidated, as it streams.
    public var maxResponseBodyBytes: Int
    /// A refresh call's (token service's) response: past it, the refresh fails.
    public var maxRefreshBodyBytes: Int
    public var headerTimeout: Duration
    public var idleTimeout: Duration
    /// How long a graceful stop waits for calls in flight.
    public var drainTimeout: Duration

    public init(
        maxHeaderBytes: Int = 16384, maxBodyBytes: Int = 1_048_576, maxResponseBodyBytes: Int = 1_048_576,
        maxRefreshBodyBytes: Int = 65_536, headerTimeout: Duration = .seconds(10),
        idleTimeout: Duration = .seconds(60), drainTimeout: Duration = .seconds(30)
    ) {
        self.maxResponseBodyBytes = maxResponseBodyBytes
        self.maxRefreshBodyBytes = maxRefreshBodyBytes
        self.drainTimeout = drainTimeout
        self.maxHeaderBytes = maxHeaderBytes
        self.maxBodyBytes = maxBodyBytes
        self.headerTimeout = headerTimeout
        self.idleTimeout = idleTimeout
    }
}

public struct UpstreamConfig: Sendable, Hashable {
    public static let echoName = "echo"
    /// The built-in upstream that answers with a description of what it received.
    public static let echo = UpstreamConfig(name: echoName, url: nil)

    public var name: String
    /// The first endpoint; nil only for the built-in `echo`. Its authority is
    /// what `Host` becomes, whichever endpoint a call goes to.
    public var url: UpstreamURL? { endpoints.first }
    /// Where calls go: one URL (`url`), or several (`endpoints`) sharing
    /// scheme, base path and query.
    public var endpoints: [UpstreamURL]
    public var balance = Balance.roundRobin
    public var healthCheck: HealthCheckConfig?
    public var outlier: OutlierConfig?
    /// Calls that may wait for a connection (all event loops together);
    /// past it a call gets 503 at once. nil: bounded by the call's deadline only.
    public var maxPending: Int?
    /// Tries in flight (all event loops together); past it a call gets 503 at once.
    public var maxRequests: Int?
    public var maxConnections: Int
    public var connectTimeout: Duration
    /// A pooled connection idle this long is closed, not reused: below the
    /// keep-alive timeouts of common servers (Node's 5 s), so the upstream
    /// rarely closes a connection just as a request goes out on it.
    public var idleTimeout: Duration
    public var http2: Bool
    public var headers: HeaderRules
    /// For https upstreams: extra trust and the name to verify.
    public var tls: UpstreamTLS

    public init(
        name: String, url: UpstreamURL?, maxConnections: Int = 64, connectTimeout: Duration = .seconds(1),
        idleTimeout: Duration = .seconds(4), http2: Bool = false, headers: HeaderRules = HeaderRules(), tls: UpstreamTLS = UpstreamTLS()
    ) {
        self.name = name
        endpoints = url.map { [$0] } ?? []
        self.maxConnections = maxConnections
        self.connectTimeout = connectTimeout
        self.idleTimeout = idleTimeout
        self.http2 = http2
        self.headers = headers
        self.tls = tls
    }

    public var isEcho: Bool { url == nil }
    /// What `Host` becomes upstream.
    public var authority: String { url?.authority ?? UpstreamConfig.echoName }
}

/// How an https upstream is verified: the system's trust roots plus
/// `caFile`; the certificate must name `serverName` (default: the URL's host;
/// an IP-literal host has its chain verified but sends no SNI name).
public struct UpstreamTLS: Sendable, Hashable {
    public var caFile: String?
    public var serverName: String?
    public init(caFile: String? = nil, serverName: String? = nil) {
        self.caFile = caFile
        self.serverName = serverName
    }
}

public struct RouteConfig: Sendable {
    public var name: String
    public var match: RouteMatch
    public var upstream: String
    public var rewrite: Rule?
    public var headers: HeaderRules
    public var responseHeaders: HeaderRules
    /// Keep the client's Host instead of the upstream's authority.
    public var keepHost: Bool
    public var timeout: Duration?
    public var retry: RetryPolicy?
    public var validate: [ValidatorSpec]
    public var rateLimit: RateLimitConfig?
    /// Protocols a client may switch to (`Upgrade`, lower case), e.g. `websocket`: the call becomes a tunnel.
    public var upgrade: [String] = []
    /// `rewrite.prefix`: replaces the `match.prefix` a path starts with, the rest kept (Envoy's `prefix_rewrite`).
    public var prefixRewrite: String?
    /// `filters`: the Proxy-Wasm filters the route runs, in order (nil: `default_filters`).
    public var filters: [String]?
    /// `response`: the answer decoded and shaped into the client's JSON (nil: it streams as it came).
    public var response: AnswerRule?
    /// `cache`: its GET and HEAD answers stored and served (nil: never).
    public var cache: RouteCacheConfig?

    public init(
        name: String, match: RouteMatch = RouteMatch(), upstream: String, rewrite: Rule? = nil,
        headers: HeaderRules = HeaderRules(), responseHeaders: HeaderRules = HeaderRules(), keepHost: Bool = false,
        timeout: Duration? = nil, retry: RetryPolicy? = nil, validate: [ValidatorSpec] = []
    ) {
        self.name = name
        self.match = match
        self.upstream = upstream
        self.rewrite = rewrite
        self.headers = headers
        self.responseHeaders = responseHeaders
        self.keepHost = keepHost
        self.timeout = timeout
        self.retry = retry
        self.validate = validate
    }
}
