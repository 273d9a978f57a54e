import NIOCore
import NIOHTTP1
import Rewriter

/// One downstream call at a time — an HTTP/1.1 connection (NIO's pipelining
/// handler queues the next request until this one's answer ends) or one
/// HTTP/2 stream. Collects the request (up to `limits.max_body_bytes`),
/// routes and translates it, forwards it on a pooled upstream connection of
/// this event loop and streams the answer back part by part.
final class ProxyHandler: ChannelInboundHandler, UpstreamResponseDelegate {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let shared: ListenerContext
    private var context: ChannelHandlerContext!

    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var tooLarge = false

    private var call: Call?
    private var timer: Scheduled<Void>?

    /// The call in flight: what was asked, where it went, how far the answer got.
    private struct Call {
        var requestHead: HTTPRequestHead
        var request: UpstreamRequest
        var route: RouteConfig
        var upstream: UpstreamConfig
        var requestID: String
        var connection: UpstreamConnection?
        var responseHeadSent = false
        var replayed = false
    }

    /// HTTP/2 streams end with their call; connection timers are the HTTP/1 side's.
    private let isStream: Bool

    init(shared: ListenerContext, isStream: Bool) {
        self.shared = shared
        self.isStream = isStream
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func channelActive(context: ChannelHandlerContext) {
        armTimer(shared.config.limits.headerTimeout)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            timer?.cancel()
            self.head = head
            body.removeAll(keepingCapacity: true)
            tooLarge = false
            if headerBytes(head.headers) > shared.config.limits.maxHeaderBytes {
                self.head = nil
                return answer(Problem(status: 431, code: "headers-too-large", title: "Request header fields too large",
                                      detail: "the headers exceed limits.max_header_bytes (\(shared.config.limits.maxHeaderBytes))"),
                              to: head, close: true)
            }
        case .body(var buffer):
            guard head != nil, !tooLarge else { return }
            if body.count + buffer.readableBytes > shared.config.limits.maxBodyBytes {
                tooLarge = true
                body = []
            } else {
                body.append(contentsOf: buffer.readBytes(length: buffer.readableBytes)!)
            }
        case .end:
            guard let head else { return }
            self.head = nil
            handle(head)
        }
    }

    private func headerBytes(_ headers: HTTPHeaders) -> Int {
        headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 }
    }

    // MARK: Request

    private func handle(_ head: HTTPRequestHead) {
        if tooLarge {
            return answer(Problem(status: 413, code: "body-too-large", title: "Request body too large",
                                  detail: "the body exceeds limits.max_body_bytes (\(shared.config.limits.maxBodyBytes))"),
                          to: head, close: true)
        }
        guard head.uri.hasPrefix("/") else {
            return answer(Problem(status: 400, code: "bad-target", title: "Bad request target",
                                  detail: "only origin-form targets (/path?query) are accepted; the gateway is not an open proxy"),
                          to: head)
        }
        let method = head.method.rawValue
        let path = String(head.uri.prefix { $0 != "?" })
        var headers = HeaderList(head.headers.map { HeaderList.Field(name: $0.name, value: $0.value) })
        if !headers.contains("Host"), let authority = headers[":authority"] { headers.set("Host", authority) }
        guard let match = shared.router.match(method: method, path: path, host: headers["Host"], headers: headers) else {
            return answer(.noRoute(method: method, path: path), to: head)
        }
        let upstream = shared.config.upstream(named: match.route.upstream)!
        headers.remove("Content-Length")
        if !body.isEmpty { headers.add("Content-Length", String(body.count)) }
        let requestID = ClientInfo.requestID(from: headers)
        let client = ClientInfo(address: context.channel.remoteAddress?.ipAddress ?? "unknown", scheme: shared.scheme, requestID: requestID)
        let request: UpstreamRequest
        do {
            request = try UpstreamRequest.build(method: method, target: head.uri, headers: headers, body: body, route: match.route,
                                                upstream: upstream, captures: match.captures, client: client)
        } catch {
            return answer(error, to: head, requestID: requestID)
        }
        if upstream.isEcho {
            var responseHeaders: HeaderList = ["Content-Type": "application/json", "X-Request-Id": requestID]
            match.route.responseHeaders.apply(to: &responseHeaders)
            return answer(status: 200, headers: responseHeaders, body: EchoUpstream.response(to: request), to: head)
        }
        call = Call(requestHead: head, request: request, route: match.route, upstream: upstream, requestID: requestID)
        armTimer(match.route.timeout ?? Self.defaultTimeout)
        forward()
    }

    static let defaultTimeout = Duration.seconds(60)

    private func forward() {
        guard let call else { return }
        let pool = shared.pools.pool(for: context.eventLoop)
        pool.acquire(call.upstream).whenComplete { [self] result in
            guard self.call != nil else {
                // The call ended (deadline, client gone) while we waited.
                if case .success(let connection) = result { pool.release(connection) }
                return
            }
            switch result {
            case .success(let connection):
                self.call?.connection = connection
                connection.send(call.request, delegate: self)
            case .failure(let error):
                let upstreamError = error as? UpstreamError ?? .connectFailure("\(error)")
                upstreamFailed(upstreamError, responseStarted: false)
            }
        }
    }

    // MARK: Response

    func upstreamHead(_ upstreamHead: HTTPResponseHead) {
        guard var call else { return }
        var headers = HeaderList(upstreamHead.headers.map { HeaderList.Field(name: $0.name, value: $0.value) })
        let named = Set(headers.values("Connection").flatMap { $0.split(separator: ",") }.map {
            $0.filter { $0 != " " && $0 != "\t" }.lowercased()
        })
        headers.removeAll { UpstreamRequest.hopByHop.contains($0.name.lowercased()) || named.contains($0.name.lowercased()) }
        headers.set("X-Request-Id", call.requestID)
        call.route.responseHeaders.apply(to: &headers)
        var nioHeaders = HTTPHeaders(headers.map { ($0.name, $0.value) })
        if !call.requestHead.isKeepAlive { nioHeaders.replaceOrAdd(name: "Connection", value: "close") }
        call.responseHeadSent = true
        self.call = call
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: call.requestHead.version, status: upstreamHead.status,
                                                              headers: nioHeaders))), promise: nil)
    }

    func upstreamBody(_ buffer: ByteBuffer) {
        guard call != nil else { return }
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        if !context.channel.isWritable { call?.connection?.channel.setOption(ChannelOptions.autoRead, value: false).whenComplete { _ in } }
    }

    func upstreamEnd() {
        guard let call else { return }
        self.call = nil
        timer?.cancel()
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        finishExchange(keepAlive: call.requestHead.isKeepAlive, done: done)
    }

    func upstreamFailed(_ error: UpstreamError, responseStarted: Bool) {
        guard let call else { return }
        // A reused keep-alive connection the upstream closed as we sent: the
        // request never reached it, so replay once on a fresh connection.
        if !responseStarted, !call.replayed, error.name == "reset", let connection = call.connection, connection.uses > 1 {
            self.call?.replayed = true
            self.call?.connection = nil
            return forward()
        }
        self.call = nil
        timer?.cancel()
        if call.responseHeadSent {
            // The answer is cut short: never pretend it ended.
            context.close(promise: nil)
            return
        }
        let problem = Problem(status: 502, code: "upstream-\(error.name)", title: "Upstream failed",
                              detail: "upstream \(call.upstream.name): \(error.detail)", route: call.route.name)
        answer(problem, to: call.requestHead, requestID: call.requestID)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, let connection = call?.connection {
            connection.channel.setOption(ChannelOptions.autoRead, value: true).whenComplete { _ in }
        }
        context.fireChannelWritabilityChanged()
    }

    /// A malformed request (bad framing, smuggling attempt): NIO's error handler
    /// has answered 400 and nothing after it on this connection can be trusted.
    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if error is HTTPParserError { context.close(promise: nil) } else { context.fireErrorCaught(error) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        if let call {
            self.call = nil
            call.connection?.abandon()
        }
        context.fireChannelInactive()
    }

    // MARK: Timers

    private func armTimer(_ duration: Duration) {
        timer?.cancel()
        let (seconds, attoseconds) = duration.components
        let delay = TimeAmount.nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        timer = context.eventLoop.scheduleTask(in: delay) { [self] in timerFired() }
    }

    private func timerFired() {
        guard context.channel.isActive else { return }
        guard let call else {
            // No request in flight: the client sent no (complete) head in time.
            if head == nil { context.close(promise: nil) }
            return
        }
        self.call = nil
        call.connection?.abandon()
        if call.responseHeadSent {
            context.close(promise: nil)
        } else {
            answer(Problem(status: 504, code: "deadline", title: "Upstream took too long",
                           detail: "no complete answer from upstream \(call.upstream.name) within the route's timeout", route: call.route.name),
                   to: call.requestHead, requestID: call.requestID)
        }
    }

    // MARK: Answers of our own

    private func answer(_ problem: Problem, to head: HTTPRequestHead, requestID: String? = nil, close: Bool = false) {
        var headers: HeaderList = ["Content-Type": Problem.contentType]
        if let requestID { headers.add("X-Request-Id", requestID) }
        answer(status: problem.status, headers: headers, body: problem.json, to: head, close: close)
    }

    private func answer(status: Int, headers: HeaderList, body: [UInt8], to head: HTTPRequestHead, close: Bool = false) {
        var nioHeaders = HTTPHeaders(headers.map { ($0.name, $0.value) })
        nioHeaders.replaceOrAdd(name: "Content-Length", value: String(body.count))
        let keepAlive = head.isKeepAlive && !close
        if !keepAlive { nioHeaders.replaceOrAdd(name: "Connection", value: "close") }
        let responseHead = HTTPResponseHead(version: head.version, status: HTTPResponseStatus(statusCode: status), headers: nioHeaders)
        context.write(wrapOutboundOut(.head(responseHead)), promise: nil)
        if head.method != .HEAD {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
        }
        finishExchange(keepAlive: keepAlive, done: context.writeAndFlush(wrapOutboundOut(.end(nil))))
    }

    private func finishExchange(keepAlive: Bool, done: EventLoopFuture<Void>) {
        if keepAlive {
            if !isStream { armTimer(shared.config.limits.idleTimeout) }
        } else {
            done.whenComplete { [context] _ in context?.close(promise: nil) }
        }
    }
}
