import NIOCore
import NIOHTTP1
import NIOPosix
import Rewriter

/// The admin listener: `/healthz`, `/readyz`, `/metrics` (Prometheus text),
/// `/config` (as loaded, secrets redacted), `/routes` (the route table),
/// `/upstreams` (endpoints and their health), `/store` (the fleet store's
/// state), `POST /reload` and `DELETE /cache`; with `admin.token`, the last six need it as a bearer token. Runs on its own event loop, so a busy data path cannot starve
/// health checks.
package final class AdminServer: Sendable {
    /// What the endpoints read; closures so the admin knows nothing of how
    /// metrics are kept or config reloaded.
    package struct Endpoints: Sendable {
        package var status: ServingStatus
        package var metrics: @Sendable () -> [UInt8]
        package var config: @Sendable () -> String
        package var routes: @Sendable () -> String
        /// Each upstream's endpoints and their health, as JSON.
        package var upstreams: @Sendable () -> String
        /// The store's address and state (up, down and why), as JSON.
        package var store: @Sendable () -> String
        /// The running config's OpenAPI document, as JSON.
        package var openapi: @Sendable () -> [UInt8]
        package var reload: @Sendable () async -> ReloadOutcome
        /// Purges stored answers (all, one route's, one URI's); returns how many keys went.
        package var purgeCache: @Sendable (_ route: String?, _ uri: String?) -> Int
        /// The running config's `admin.token` (a reload may change it).
        package var token: @Sendable () -> String?

        package init(status: ServingStatus, metrics: @escaping @Sendable () -> [UInt8], config: @escaping @Sendable () -> String,
                    routes: @escaping @Sendable () -> String, upstreams: @escaping @Sendable () -> String,
                    store: @escaping @Sendable () -> String = { "null" },
                    openapi: @escaping @Sendable () -> [UInt8] = { Array("{}".utf8) },
                    reload: @escaping @Sendable () async -> ReloadOutcome,
                    purgeCache: @escaping @Sendable (String?, String?) -> Int = { _, _ in 0 },
                    token: @escaping @Sendable () -> String?) {
            self.status = status
            self.metrics = metrics
            self.config = config
            self.routes = routes
            self.upstreams = upstreams
            self.store = store
            self.openapi = openapi
            self.reload = reload
            self.purgeCache = purgeCache
            self.token = token
        }
    }

    private let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    private let endpoints: Endpoints

    package init(endpoints: Endpoints) { self.endpoints = endpoints }

    package func start(on address: SocketAddressSpec) async throws -> SocketAddress {
        let endpoints = endpoints
        do {
            let channel = try await ServerBootstrap(group: group)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                        try channel.pipeline.syncOperations.addHandler(AdminHandler(endpoints: endpoints))
                    }
                }
                .bind(host: address.host, port: address.port).get()
            return channel.localAddress!
        } catch {
            throw StartupError.cannotListen("admin endpoint", on: address, error)
        }
    }

    package func shutdown() async throws { try await group.shutdownGracefully() }
}

/// What a reload came to; the admin answers it, signals log it.
package enum ReloadOutcome: Sendable, Equatable {
    case reloaded
    /// The new config was refused; the old one still serves.
    case failed([String])
}

private final class AdminHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let endpoints: AdminServer.Endpoints
    private var head: HTTPRequestHead?

    init(endpoints: AdminServer.Endpoints) { self.endpoints = endpoints }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): self.head = head
        case .body: break
        case .end:
            guard let head else { return }
            self.head = nil
            serve(head, context: context)
        }
    }

    private func serve(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        let path = String(head.uri.prefix { $0 != "?" })
        if ["/config", "/routes", "/upstreams", "/store", "/openapi.json", "/reload", "/cache"].contains(path), let token = endpoints.token(), !Self.authorized(head, token: token) {
            return respond(401, Problem.contentType, Problem.unauthorized.json, to: head, context: context,
                           extra: [("WWW-Authenticate", #"Bearer realm="gatewayd admin""#)])
        }
        switch (head.method, path) {
        case (.GET, "/healthz"), (.HEAD, "/healthz"):
            respond(200, "text/plain", Array("ok\n".utf8), to: head, context: context)
        case (.GET, "/readyz"), (.HEAD, "/readyz"):
            let ready = endpoints.status.isReady
            respond(ready ? 200 : 503, "text/plain", Array((ready ? "ready\n" : "not ready\n").utf8), to: head, context: context)
        case (.GET, "/metrics"):
            respond(200, "text/plain; version=0.0.4; charset=utf-8", endpoints.metrics(), to: head, context: context)
        case (.GET, "/config"):
            respond(200, "application/yaml; charset=utf-8", Array(endpoints.config().utf8), to: head, context: context)
        case (.GET, "/routes"):
            respond(200, "text/plain; charset=utf-8", Array(endpoints.routes().utf8), to: head, context: context)
        case (.GET, "/upstreams"):
            respond(200, "application/json", Array(endpoints.upstreams().utf8), to: head, context: context)
        case (.GET, "/store"):
            respond(200, "application/json", Array(endpoints.store().utf8), to: head, context: context)
        case (.GET, "/openapi.json"):
            respond(200, "application/json", endpoints.openapi(), to: head, context: context)
        case (.POST, "/reload"):
            let promise = context.eventLoop.makePromise(of: ReloadOutcome.self)
            promise.completeWithTask { [endpoints] in await endpoints.reload() }
            promise.futureResult.assumeIsolated().whenSuccess { [self] outcome in
                switch outcome {
                case .reloaded:
                    respond(200, "application/json", Array(#"{"status":"reloaded"}"#.utf8), to: head, context: context)
                case .failed(let errors):
                    let problem = Problem.reloadFailed(errors)
                    respond(422, Problem.contentType, problem.json, to: head, context: context)
                }
            }
        case (.DELETE, "/cache"):
            let query = Self.query(head.uri)
            let purged = endpoints.purgeCache(query["route"], query["uri"])
            respond(200, "application/json", Array(#"{"purged":\#(purged)}"#.utf8), to: head, context: context)
        case (_, "/healthz"), (_, "/readyz"), (_, "/metrics"), (_, "/config"), (_, "/routes"), (_, "/upstreams"), (_, "/store"), (_, "/openapi.json"),
             (_, "/reload"), (_, "/cache"):
            let allowed = path == "/reload" ? "POST" : path == "/cache" ? "DELETE" : path == "/healthz" || path == "/readyz" ? "GET, HEAD" : "GET"
            let problem = Problem.methodNotAllowed("\(head.method.rawValue) \(path): use \(allowed.prefix { $0 != "," })")
            respond(405, Problem.contentType, problem.json, to: head, context: context, extra: [("Allow", allowed)])
        default:
            let problem = Problem.notFound("admin endpoints: /healthz /readyz /metrics /config /routes /upstreams /store /openapi.json, POST /reload, DELETE /cache")
            respond(404, Problem.contentType, problem.json, to: head, context: context)
        }
    }

    /// A target's query parameters, percent-decoded (the last of a name wins).
    static func query(_ uri: String) -> [String: String] {
        guard let mark = uri.firstIndex(of: "?") else { return [:] }
        var parameters: [String: String] = [:]
        for pair in uri[uri.index(after: mark)...].split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { PercentEncoding.decode($0, plusAsSpace: true) ?? String($0) }
            if let name = parts.first { parameters[name] = parts.count > 1 ? parts[1] : "" }
        }
        return parameters
    }

    /// `Authorization: Bearer <token>`, compared in constant time.
    static func authorized(_ head: HTTPRequestHead, token: String) -> Bool {
        guard let given = head.headers.first(name: "Authorization"), given.hasPrefix("Bearer ") else { return false }
        let a = Array(given.utf8.dropFirst(7)), b = Array(token.utf8)
        guard a.count == b.count else { return false }
        return zip(a, b).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }

    private func respond(_ status: Int, _ contentType: String, _ body: [UInt8], to head: HTTPRequestHead, context: ChannelHandlerContext,
                         extra: [(String, String)] = []) {
        var headers = HTTPHeaders([("Content-Type", contentType), ("Content-Length", String(body.count))] + extra)
        if !head.isKeepAlive { headers.add(name: "Connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .init(statusCode: status), headers: headers))),
                      promise: nil)
        if head.method != .HEAD { context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil) }
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
            if !head.isKeepAlive { context.close(promise: nil) }
        }
    }
}
