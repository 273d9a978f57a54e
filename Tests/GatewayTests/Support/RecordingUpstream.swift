import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL

/// A fake HTTP/1.1 upstream on 127.0.0.1:0 that records exactly what reached
/// its socket (request head with header case and order, body bytes) and
/// answers as the test scripts it. `port` and `channel` are set once by
/// `start()` before any other use.
final class RecordingUpstream: @unchecked Sendable {
    struct Request: Sendable {
        var method: String
        var uri: String
        var headers: [(String, String)]
        var body: [UInt8]
        /// Body bytes received (also counted when bodies are not kept).
        var bodyCount = 0
        func header(_ name: String) -> [String] { headers.filter { $0.0.lowercased() == name.lowercased() }.map(\.1) }
    }

    enum Reply: Sendable {
        case respond(status: Int, headers: [(String, String)], body: [UInt8], delay: TimeAmount = .zero)
        /// Sends the head and part of the body, then closes the connection.
        case cutShort(bodyPrefix: [UInt8], declaredLength: Int)
        case close
        /// HTTP/2 only: RST_STREAM with REFUSED_STREAM (the request was not processed).
        case refuseStream
    }

    private let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    private let state = NIOLockedValueBox<(requests: [Request], connections: Int)>(([], 0))
    let script: @Sendable (Request) -> Reply
    /// False: only count body bytes (for uploads larger than the test should hold).
    let keepBodies: Bool
    /// When set, the upstream speaks HTTPS.
    let tls: NIOSSLContext?
    /// HTTP/2 (h2c by prior knowledge) instead of HTTP/1.1.
    let http2: Bool
    private(set) var port = 0
    private var channel: Channel?

    init(keepBodies: Bool = true, tls: NIOSSLContext? = nil, http2: Bool = false,
         script: @escaping @Sendable (Request) -> Reply = { _ in .respond(status: 200, headers: [], body: Array("ok".utf8)) }) {
        self.keepBodies = keepBodies
        self.tls = tls
        self.http2 = http2
        self.script = script
    }

    /// `script` also gets how many requests for this target arrived so far
    /// (1 for the first): an upstream that fails on cue.
    static func counting(http2: Bool = false, _ script: @escaping @Sendable (Request, Int) -> Reply) -> RecordingUpstream {
        let counts = NIOLockedValueBox<[String: Int]>([:])
        return RecordingUpstream(http2: http2) { request in
            script(request, counts.withLockedValue { $0[request.uri, default: 0] += 1; return $0[request.uri]! })
        }
    }

    var requests: [Request] { state.withLockedValue { $0.requests } }
    var connections: Int { state.withLockedValue { $0.connections } }

    /// `port`: a given one (an upstream that comes back where it was), or any free one.
    func start(port wanted: Int = 0) async throws -> Int {
        Teardown.register { await self.stop() }
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { [state, script, keepBodies, tls, http2] channel in
                state.withLockedValue { $0.connections += 1 }
                return channel.eventLoop.makeCompletedFuture {
                    if let tls { try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls)) }
                    if http2 {
                        _ = try channel.pipeline.syncOperations.configureHTTP2Pipeline(
                            mode: .server, connectionConfiguration: .init(), streamConfiguration: .init()
                        ) { stream in
                            stream.eventLoop.makeCompletedFuture {
                                try stream.pipeline.syncOperations.addHandler(HTTP2FramePayloadToHTTP1ServerCodec())
                                try stream.pipeline.syncOperations.addHandler(Handler(state: state, script: script, keepBodies: keepBodies))
                            }
                        }
                        return
                    }
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Handler(state: state, script: script, keepBodies: keepBodies))
                }
            }
            .bind(host: "127.0.0.1", port: wanted).get()
        self.channel = channel
        port = channel.localAddress!.port!
        return port
    }

    /// Once: a test's own stop and its scope's teardown may both ask.
    func stop() async {
        let first = stopped.withLockedValue { stopped in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        try? await channel?.close()
        try? await group.shutdownGracefully()
    }
    private let stopped = NIOLockedValueBox(false)

    private final class Handler: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let state: NIOLockedValueBox<(requests: [Request], connections: Int)>
        let script: @Sendable (Request) -> Reply
        let keepBodies: Bool
        var current: Request?

        init(state: NIOLockedValueBox<(requests: [Request], connections: Int)>, script: @escaping @Sendable (Request) -> Reply,
             keepBodies: Bool) {
            self.state = state
            self.script = script
            self.keepBodies = keepBodies
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                current = Request(method: head.method.rawValue, uri: head.uri, headers: head.headers.map { ($0.name, $0.value) }, body: [])
            case .body(let buffer):
                current?.bodyCount += buffer.readableBytes
                if keepBodies { current?.body += buffer.readableBytesView }
            case .end:
                guard let request = current else { return }
                state.withLockedValue { $0.requests.append(request) }
                reply(script(request), context: context)
            }
        }

        private func reply(_ reply: Reply, context: ChannelHandlerContext) {
            switch reply {
            case .close:
                context.close(promise: nil)
            case .refuseStream:
                // Written below the HTTP/1 translation, straight onto the stream.
                let codec = try! context.pipeline.syncOperations.context(handlerType: HTTP2FramePayloadToHTTP1ServerCodec.self)
                codec.writeAndFlush(NIOAny(HTTP2Frame.FramePayload.rstStream(.refusedStream)), promise: nil)
            case .cutShort(let prefix, let length):
                var headers = HTTPHeaders()
                headers.add(name: "Content-Length", value: String(length))
                context.write(wrapOutboundOut(.head(.init(version: .http1_1, status: .ok, headers: headers))), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: prefix)))))
                    .assumeIsolated().whenComplete { _ in context.close(promise: nil) }
            case .respond(let status, let extra, let body, let delay):
                let send = {
                    var headers = HTTPHeaders(extra)
                    if !headers.contains(name: "Content-Length") { headers.add(name: "Content-Length", value: String(body.count)) }
                    context.write(self.wrapOutboundOut(.head(.init(version: .http1_1, status: .init(statusCode: status), headers: headers))), promise: nil)
                    context.write(self.wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
                    context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
                }
                if delay == .zero { send() } else { context.eventLoop.assumeIsolated().scheduleTask(in: delay, send) }
            }
        }
    }
}
