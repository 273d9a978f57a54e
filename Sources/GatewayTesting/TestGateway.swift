import Gateway
import Glibc
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix

/// A gateway for an embedder's tests, as HummingbirdTesting is for a
/// Hummingbird app: the whole gateway (routes, translation, retries,
/// validators, cache, the embedder's modifiers and validators) serving
/// `execute`'s requests, its upstreams answered by Swift closures in the
/// test's process. No socket is opened: each connection, the client's and
/// every upstream one, is a pair of pipes on the gateway's own event loop.
///
/// ```swift
/// let gateway = try await TestGateway(config: config, modifiers: [Sign()], upstreams: [
///     "app": { request in TestResponse(text: request["X-Signature"] ?? "unsigned") },
/// ])
/// let answer = try await gateway.execute(TestRequest(target: "/orders?id=7"))
/// try await gateway.shutdown()
/// ```
public final class TestGateway: Sendable {
    /// An in-process upstream: each whole request in, its answer out (a throw answers 500).
    public typealias Upstream = @Sendable (TestRequest) async throws -> TestResponse

    private let group: MultiThreadedEventLoopGroup
    private let server: GatewayServer

    /// Serves `config` with these hooks; a route's upstream named in
    /// `upstreams` is answered by its closure (by every endpoint's URL);
    /// the built-in `echo` answers as it does in `gatewayd`; any other
    /// upstream fails its connect. `accessLines`: each access-log line.
    public init(config: GatewayConfig, modifiers: [any RequestModifier] = [], validators: [any ResponseValidator] = [],
                upstreams: [String: Upstream] = [:], accessLines: (@Sendable ([UInt8]) -> Void)? = nil) async throws {
        // A write to a pipe whose reader has gone raises SIGPIPE; NIO reports it as an error instead.
        signal(SIGPIPE, SIG_IGN)
        var byURL: [String: Upstream] = [:]
        for upstream in config.upstreams {
            guard let respond = upstreams[upstream.name] else { continue }
            for endpoint in upstream.endpoints { byURL[endpoint.description] = respond }
        }
        let connector = UpstreamConnector { [byURL] url, loop, _, initialize in
            guard let respond = byURL[url.description] else {
                return loop.makeFailedFuture(TestGatewayError(message: "no in-process upstream answers \(url)"))
            }
            return InProcessPipe.make(on: loop, near: initialize) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(InProcessUpstream(respond))
                }
            }.map(\.near)
        }
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        server = GatewayServer(config: config, group: group, modifiers: modifiers, validators: validators,
                               logger: Logger(label: "gatewayd"), accessLines: accessLines, connector: connector)
        do {
            try await server.serveInProcess()
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    /// Sends `request` over HTTP/1.1 on a new connection to `listeners[listener]`
    /// and returns the whole answer.
    public func execute(_ request: TestRequest, listener: Int = 0) async throws -> TestResponse {
        let loop = group.next()
        let answer = loop.makePromise(of: TestResponse.self)
        let (near, far) = try await InProcessPipe.make(on: loop, near: { _ in loop.makeSucceededVoidFuture() }) { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHTTPClientHandlers()
                try channel.pipeline.syncOperations.addHandler(ResponseCollector(answer))
            }
        }.get()
        try await server.accept(near, listener: listener)
        var headers = HTTPHeaders(request.headers.map { ($0.name, $0.value) })
        if !headers.contains(name: "Host") { headers.add(name: "Host", value: "gateway.test") }
        headers.replaceOrAdd(name: "Connection", value: "close")
        if !request.body.isEmpty { headers.replaceOrAdd(name: "Content-Length", value: "\(request.body.count)") }
        let head = HTTPRequestHead(version: .http1_1, method: HTTPMethod(rawValue: request.method), uri: request.target, headers: headers)
        far.write(HTTPClientRequestPart.head(head), promise: nil)
        if !request.body.isEmpty { far.write(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(bytes: request.body))), promise: nil) }
        try await far.writeAndFlush(HTTPClientRequestPart.end(nil))
        defer { far.close(promise: nil) }
        return try await answer.futureResult.get()
    }

    /// Stops serving and frees the event loop.
    public func shutdown() async throws {
        try await server.shutdown()
        try await group.shutdownGracefully()
    }
}

/// What went wrong in the test's own set-up (not an answer of the gateway's).
public struct TestGatewayError: Error, CustomStringConvertible {
    /// What happened.
    public let message: String
    /// An error saying `message`.
    public init(message: String) { self.message = message }
    /// The message.
    public var description: String { message }
}

/// The test client's end: the answer collected whole, or the failure.
private final class ResponseCollector: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPClientResponsePart

    private let promise: EventLoopPromise<TestResponse>
    private var response: TestResponse?

    init(_ promise: EventLoopPromise<TestResponse>) { self.promise = promise }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            response = TestResponse(status: Int(head.status.code), headers: head.headers.map { ($0.name, $0.value) })
        case .body(let buffer):
            response?.body += buffer.readableBytesView
        case .end:
            if let response { promise.succeed(response) }
            response = nil
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        promise.fail(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(TestGatewayError(message: "the gateway closed the connection before a whole answer"))
    }
}
