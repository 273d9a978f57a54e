import Rewriter

/// The whole configuration, validated. Built by `ConfigLoader` from YAML, or
/// directly by an embedding program.
public struct GatewayConfig: Sendable {
    /// `listeners`: the addresses calls arrive on, each with its protocols and TLS.
    public var listeners: [ListenerConfig]
    /// `admin`: the loopback listener for health, metrics, config and reload (nil: none).
    public var admin: AdminConfig?
    /// `limits`: sizes and timeouts every call is held to.
    public var limits: Limits
    /// Declared upstreams in file order; `echo` is built in and never listed.
    public var upstreams: [UpstreamConfig]
    /// `routes`: the first whose match fits a request serves it.
    public var routes: [RouteConfig]
    /// `logging`: the access log and the operational log.
    public var logging: LoggingConfig
    /// `tracing`: W3C Trace Context, and spans exported over OTLP.
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

    /// A configuration without the optional blocks; set the others as properties.
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

    /// The upstream called `name`: a declared one, or the built-in `echo`.
    public func upstream(named name: String) -> UpstreamConfig? {
        name == UpstreamConfig.echoName ? .echo : upstreams.first { $0.name == name }
    }
}

/// `tracing`: W3C Trace Context (traceparent / tracestate) for every call.
/// `propagate`: a valid traceparent goes upstream with a new span id for the
/// gateway's hop; `start`: a call without a valid one starts a trace. Off by
/// default: the fields then pass through as any other.
public struct TracingConfig: Sendable, Hashable {
    /// `propagate`: a valid traceparent goes upstream with the gateway's hop as its parent.
    public var propagate = false
    /// `start`: a call that comes without a valid traceparent starts a trace here.
    public var start = false
    /// `export.otlp`: the spans of sampled calls go to an OpenTelemetry collector.
    public var export: SpanExportConfig?
    /// Tracing with each part as given; everything off by default.
    public init(propagate: Bool = false, start: Bool = false, export: SpanExportConfig? = nil) {
        self.propagate = propagate
        self.start = start
        self.export = export
    }
    /// Whether any call carries trace context.
    public var isOn: Bool { propagate || start }
}

/// `tracing.export.otlp`: where and how spans are sent (OTLP 1.x over
/// HTTP/1.1 as protobuf, or gRPC over HTTP/2), the share of new traces
/// sampled, and the `service.name` they carry.
public struct SpanExportConfig: Sendable, Hashable {
    /// `transport`: how spans reach the collector.
    public enum Transport: String, Sendable, CaseIterable {
        case httpProtobuf = "http/protobuf"
        case grpc
    }

    /// The collector; for http/protobuf a URL without a path posts to `/v1/traces`.
    public var endpoint: UpstreamURL
    /// `http/protobuf` (the default) or `grpc`.
    public var transport = Transport.httpProtobuf
    /// Of the traces that start here; a propagated trace keeps its caller's sampled flag.
    public var sampleRatio = 1.0
    /// `service_name`: the `service.name` resource attribute of every span.
    public var serviceName = "gatewayd"
    /// Sent with every export (a collector's API key).
    public var headers = HeaderList()
    /// An export unanswered this long fails, and its spans are dropped.
    public var timeout = Duration.seconds(10)

    /// An export to `endpoint` with the defaults above.
    public init(endpoint: UpstreamURL) { self.endpoint = endpoint }
}

/// `logging`: what the gateway writes about itself and each call.
public struct LoggingConfig: Sendable, Hashable {
    /// `level`: the operational log's threshold (swift-log's levels).
    public enum Level: String, Sendable, CaseIterable { case trace, debug, info, notice, warning, error, critical }
    /// `text`: swift-log's default lines; `json`: one object per line; `logfmt`: key=value pairs.
    public enum Format: String, Sendable, CaseIterable { case text, json, logfmt }
    /// One line per call (client, route, upstream, status, bytes, timings, tries, request id).
    public var accessLog: Bool
    /// The access log's file (nil: standard error). Chosen at start; SIGUSR1 reopens it.
    public var accessLogPath: String?
    /// The operational log's threshold.
    public var level: Level
    /// Chosen at start; a reload does not change it.
    public var format: Format
    /// Logging with the access log on standard error, at `info`, as text.
    public init(accessLog: Bool = true, accessLogPath: String? = nil, level: Level = .info, format: Format = .text) {
        self.format = format
        self.accessLog = accessLog
        self.accessLogPath = accessLogPath
        self.level = level
    }
}

/// A host (name, IPv4 or IPv6 literal) and a port, as `host:port` or `[v6]:port` in the config.
public struct SocketAddressSpec: Sendable, Hashable, CustomStringConvertible {
    /// A name or an IP literal, without brackets.
    public var host: String
    /// 0 binds a free port (the server's `start()` returns the real one).
    public var port: Int
    /// The address `host`:`port`.
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }
    /// `host:port`, the IPv6 literal in brackets.
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// Whether the host is the local machine's loopback (the admin listener's default requirement).
    public var isLoopback: Bool { host == "localhost" || host == "::1" || host.hasPrefix("127.") }
}

/// `listeners[]`: an address calls arrive on.
public struct ListenerConfig: Sendable, Hashable {
    /// `protocols`: what a listener speaks; `h2` needs `tls`.
    public enum HTTPProtocol: String, Sendable, CaseIterable { case http1, h2c, h2 }
    /// `tls`: the certificate a TLS listener presents.
    public struct TLS: Sendable, Hashable {
        /// PEM certificate chain's path, read at start and on reload.
        public var certificate: String
        /// PEM private key's path, read at start and on reload.
        public var privateKey: String
        /// A certificate chain and its key, by path.
        public init(certificate: String, privateKey: String) {
            self.certificate = certificate
            self.privateKey = privateKey
        }
    }

    /// `address`: where to listen.
    public var address: SocketAddressSpec
    /// `protocols`: `[http1, h2c]` by default, `[http1, h2]` with `tls`.
    public var protocols: [HTTPProtocol]
    /// `tls`: the listener speaks TLS and lets ALPN choose the protocol.
    public var tls: TLS?
    /// `forwarded.trust`: peers whose X-Forwarded-* are kept and appended
    /// to, and whose X-Forwarded-For names the client; from any other peer
    /// they are replaced (docs/security.md).
    public var trustedProxies: [AddressRange] = []

    /// A listener on `address`, HTTP/1.1 and h2c by default.
    public init(address: SocketAddressSpec, protocols: [HTTPProtocol] = [.http1, .h2c], tls: TLS? = nil) {
        self.address = address
        self.protocols = protocols
        self.tls = tls
    }
}

/// `admin`: the listener for `/healthz`, `/readyz`, `/metrics`, `/config`, `/routes`, `/reload`.
public struct AdminConfig: Sendable, Hashable {
    /// `address`: loopback unless `allow_remote`.
    public var address: SocketAddressSpec
    /// Whether a non-loopback address is allowed (it then needs `token`).
    public var allowRemote: Bool
    /// When set, `/config`, `/routes` and `/reload` need `Authorization: Bearer <token>`.
    public var token: String?
    /// An admin listener on `address`.
    public init(address: SocketAddressSpec, allowRemote: Bool = false, token: String? = nil) {
        self.address = address
        self.allowRemote = allowRemote
        self.token = token
    }
}

/// `limits`: what a single call may cost; past each, a clear error, not a slow gateway.
public struct Limits: Sendable, Hashable {
    /// `max_header_bytes`: a request head past it gets 431.
    public var maxHeaderBytes: Int
    /// A request body the gateway buffers (rewrite, retry): past it, 413.
    public var maxBodyBytes: Int
    /// A response held whole for body validators: past it, it is let
    /// through unvalidated, as it streams.
    public var maxResponseBodyBytes: Int
    /// A refresh call's (token service's) response: past it, the refresh fails.
    public var maxRefreshBodyBytes: Int
    /// `header_timeout`: a request head not complete this long gets 408.
    public var headerTimeout: Duration
    /// `idle_timeout`: a connection, a body or a tunnel silent this long is closed.
    public var idleTimeout: Duration
    /// How long a graceful stop waits for calls in flight.
    public var drainTimeout: Duration

    /// The defaults `docs/configuration.md` lists.
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

/// `upstreams.NAME`: a legacy service calls go to.
public struct UpstreamConfig: Sendable, Hashable {
    /// The built-in upstream's name, which a config never declares.
    public static let echoName = "echo"
    /// The built-in upstream that answers with a description of what it received.
    public static let echo = UpstreamConfig(name: echoName, url: nil)

    /// The key under `upstreams`.
    public var name: String
    /// The first endpoint; nil only for the built-in `echo`. Its authority is
    /// what `Host` becomes, whichever endpoint a call goes to.
    public var url: UpstreamURL? { endpoints.first }
    /// Where calls go: one URL (`url`), or several (`endpoints`) sharing
    /// scheme, base path and query.
    public var endpoints: [UpstreamURL]
    /// `balance`: how a call picks among `endpoints`.
    public var balance = Balance.roundRobin
    /// `health_check`: endpoints probed and taken out of rotation when they fail.
    public var healthCheck: HealthCheckConfig?
    /// `outlier`: endpoints ejected for a while after consecutive failures.
    public var outlier: OutlierConfig?
    /// Calls that may wait for a connection (all event loops together);
    /// past it a call gets 503 at once. nil: bounded by the call's deadline only.
    public var maxPending: Int?
    /// Tries in flight (all event loops together); past it a call gets 503 at once.
    public var maxRequests: Int?
    /// `max_connections`: pooled connections per event loop.
    public var maxConnections: Int
    /// `connect_timeout`: a connection not made this long fails the try.
    public var connectTimeout: Duration
    /// A pooled connection idle this long is closed, not reused: below the
    /// keep-alive timeouts of common servers (Node's 5 s), so the upstream
    /// rarely closes a connection just as a request goes out on it.
    public var idleTimeout: Duration
    /// `http2`: calls go over h2c (or h2 for https) connections, multiplexed.
    public var http2: Bool
    /// `headers`: set, added or removed on every request to this upstream.
    public var headers: HeaderRules
    /// For https upstreams: extra trust and the name to verify.
    public var tls: UpstreamTLS

    /// An upstream at `url` (nil: like `echo`) with the defaults above.
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

    /// Whether this is the built-in `echo`.
    public var isEcho: Bool { url == nil }
    /// What `Host` becomes upstream.
    public var authority: String { url?.authority ?? UpstreamConfig.echoName }
}

/// How an https upstream is verified: the system's trust roots plus
/// `caFile`; the certificate must name `serverName` (default: the URL's host;
/// an IP-literal host has its chain verified but sends no SNI name).
public struct UpstreamTLS: Sendable, Hashable {
    /// `ca_file`: PEM roots trusted besides the system's.
    public var caFile: String?
    /// `server_name`: the name the certificate must carry (default: the URL's host).
    public var serverName: String?
    /// Verification with the system's roots and the URL's host by default.
    public init(caFile: String? = nil, serverName: String? = nil) {
        self.caFile = caFile
        self.serverName = serverName
    }
}

/// `routes[]`: which requests it serves, how they are translated, where they go, and what comes back.
public struct RouteConfig: Sendable {
    /// `name`: unique; names the route in logs, metrics and problems.
    public var name: String
    /// `match`: method, path and headers a request must have.
    public var match: RouteMatch
    /// `upstream`: the name of the upstream its calls go to.
    public var upstream: String
    /// `rewrite`: how the client's convenience JSON becomes the upstream request.
    public var rewrite: Rule?
    /// `headers`: set, added or removed on the request upstream.
    public var headers: HeaderRules
    /// `response_headers`: set, added or removed on the answer to the client.
    public var responseHeaders: HeaderRules
    /// Keep the client's Host instead of the upstream's authority.
    public var keepHost: Bool
    /// `timeout`: the call's whole deadline, retries included.
    public var timeout: Duration?
    /// `retry`: when and how a failed try is sent again.
    public var retry: RetryPolicy?
    /// `validate`: the answer's checks, in order, each with its action.
    public var validate: [ValidatorSpec]
    /// `rate_limit`: a token bucket per client or header value.
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

    /// A route to `upstream` with the given parts; set the others as properties.
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
