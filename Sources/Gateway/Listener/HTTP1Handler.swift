import NIOCore
import NIOHTTP1
import Rewriter

/// One HTTP/1.1 connection: collects each request (body bounded by
/// `limits.max_body_bytes`), routes and translates it, and answers. Only the
/// built-in `echo` upstream is served so far; forwarding to real upstreams
/// is not built yet and answers 502 saying so.
final class HTTP1Handler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let config: GatewayConfig
    private let router: Router
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var tooLarge = false

    init(config: GatewayConfig, router: Router) {
        self.config = config
        self.router = router
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body.removeAll(keepingCapacity: true)
            tooLarge = false
        case .body(var buffer):
            guard !tooLarge else { return }
            if body.count + buffer.readableBytes > config.limits.maxBodyBytes {
                tooLarge = true
                body = []
            } else {
                body.append(contentsOf: buffer.readBytes(length: buffer.readableBytes)!)
            }
        case .end:
            guard let head else { return }
            self.head = nil
            respond(to: head, context: context)
        }
    }

    private func respond(to head: HTTPRequestHead, context: ChannelHandlerContext) {
        let path = String(head.uri.prefix { $0 != "?" })
        var headers = HeaderList(head.headers.map { HeaderList.Field(name: $0.name, value: $0.value) })
        if tooLarge {
            return write(.init(status: 413, code: "body-too-large", title: "Request body too large",
                               detail: "the body exceeds limits.max_body_bytes (\(config.limits.maxBodyBytes))"), head, context)
        }
        guard head.uri.hasPrefix("/") else {
            return write(.init(status: 400, code: "bad-target", title: "Bad request target",
                               detail: "only origin-form targets (/path?query) are accepted"), head, context)
        }
        guard let match = router.match(method: head.method.rawValue, path: path, host: headers["Host"], headers: headers) else {
            return write(.noRoute(method: head.method.rawValue, path: path), head, context)
        }
        let upstream = config.upstream(named: match.route.upstream)!
        headers.remove("Content-Length")
        if !body.isEmpty { headers.add("Content-Length", String(body.count)) }
        let request: UpstreamRequest
        do {
            request = try UpstreamRequest.build(
                method: head.method.rawValue, target: head.uri, headers: headers, body: body, route: match.route,
                upstream: upstream, captures: match.captures)
        } catch {
            return write(error, head, context)
        }
        guard upstream.isEcho else {
            return write(.init(status: 502, code: "not-implemented", title: "Upstream forwarding is not built yet",
                               detail: "this build serves only the built-in echo upstream", route: match.route.name), head, context)
        }
        var responseHeaders = HeaderList([.init(name: "Content-Type", value: "application/json")])
        match.route.responseHeaders.apply(to: &responseHeaders)
        write(status: 200, headers: responseHeaders, body: EchoUpstream.response(to: request), head, context)
    }

    private func write(_ problem: Problem, _ head: HTTPRequestHead, _ context: ChannelHandlerContext) {
        write(status: problem.status, headers: ["Content-Type": Problem.contentType],
              body: problem.json, head, context)
    }

    private func write(status: Int, headers: HeaderList, body: [UInt8], _ head: HTTPRequestHead, _ context: ChannelHandlerContext) {
        var httpHeaders = HTTPHeaders(headers.map { ($0.name, $0.value) })
        httpHeaders.replaceOrAdd(name: "Content-Length", value: String(body.count))
        let keepAlive = head.isKeepAlive
        if !keepAlive { httpHeaders.replaceOrAdd(name: "Connection", value: "close") }
        let responseHead = HTTPResponseHead(version: head.version, status: HTTPResponseStatus(statusCode: status), headers: httpHeaders)
        context.write(wrapOutboundOut(.head(responseHead)), promise: nil)
        if head.method != .HEAD {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
        }
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive { done.whenComplete { _ in context.close(promise: nil) } }
    }
}
