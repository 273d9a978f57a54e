import NIOCore
import NIOHTTP1

/// The far end of an upstream connection: HTTP/1.1 as NIO's server codec
/// reads it, each whole request handed to the test's closure, its answer
/// written back; keep-alive as the request asks.
final class InProcessUpstream: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let respond: TestGateway.Upstream
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []

    init(_ respond: @escaping TestGateway.Upstream) { self.respond = respond }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = []
        case .body(let buffer):
            body += buffer.readableBytesView
        case .end:
            guard let head else { return }
            let request = TestRequest(method: head.method.rawValue, target: head.uri, headers: head.headers.map { ($0.name, $0.value) }, body: body)
            let keepAlive = head.isKeepAlive
            let respond = respond
            let loop = context.eventLoop
            let bound = NIOLoopBound((self, context), eventLoop: loop)
            loop.makeFutureWithTask { try await respond(request) }.whenComplete { result in
                let (handler, context) = bound.value
                let response = (try? result.get()) ?? TestResponse(status: 500, text: "the in-process upstream threw")
                handler.write(response, keepAlive: keepAlive, context: context)
            }
        }
    }

    private func write(_ response: TestResponse, keepAlive: Bool, context: ChannelHandlerContext) {
        var headers = HTTPHeaders(response.headers.map { ($0.name, $0.value) })
        headers.replaceOrAdd(name: "Content-Length", value: "\(response.body.count)")
        if !keepAlive { headers.replaceOrAdd(name: "Connection", value: "close") }
        let status = HTTPResponseStatus(statusCode: response.status)
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: response.body)))), promise: nil)
        let written = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: written)
        guard !keepAlive else { return }
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        written.futureResult.whenComplete { _ in bound.value.close(promise: nil) }
    }
}
