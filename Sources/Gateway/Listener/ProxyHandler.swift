import NIOCore
import NIOHTTP1
import Rewriter

/// One downstream call at a time — an HTTP/1.1 connection (NIO's pipelining
/// handler queues the next request until this one's answer ends) or one
/// HTTP/2 stream. A route that rewrites buffers the request body (up to
/// `limits.max_body_bytes`); a pass-through route streams it upstream as it
/// arrives, reading from the client only as fast as the upstream takes it.
/// Answers stream back part by part on a pooled upstream connection of this
/// event loop.
final class ProxyHandler: ChannelInboundHandler, UpstreamResponseDelegate {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let slot: ListenerSlot
    /// The listener's context as of this call's request head (a reload
    /// swaps the slot's; a call in flight keeps its own).
    private var shared: ListenerContext
    /// HTTP/2 streams end with their call; connection timers are the HTTP/1 side's.
    private let isStream: Bool
    private var context: ChannelHandlerContext!

    /// The request being read.
    private var head: HTTPRequestHead?
    /// Its headers in our form, converted once.
    private var requestHeaders = HeaderList()
    private var match: Router.Match?
    private var body: [UInt8] = []
    private var tooLarge = false
    /// Set while a request body streams upstream.
    private var streaming: Streaming?

    private var call: Call?
    private var timer: Scheduled<Void>?
    private var scheduledFor: NIODeadline?
    /// When the current wait (for a head, between requests, for an answer) ends.
    private var deadline: NIODeadline?
    /// Request ids come from this: no syscall per call or per HTTP/2 stream.
    private var random: SplitMix64
    private var log = AccessLog.Entry()
    /// The matched route's metrics (nil until a route matched).
    private var routeMetrics: RouteMetrics?

    private struct Streaming {
        /// Body parts read before the upstream connection was ready.
        var pending: [ByteBuffer] = []
        var ended = false
        var connected = false
    }

    /// The call in flight: what was asked, where it went, how far the answer
    /// got. A class: the handler reads and updates it many times per call,
    /// and a struct this size would be copied (and its references retained)
    /// at each.
    private final class Call {
        var requestHead: HTTPRequestHead
        var request: UpstreamRequest
        var route: Route
        var requestID: String
        var connection: UpstreamConnection?
        var responseHeadSent = false
        /// The route's validators and retry policy walked for this call (nil:
        /// the route has neither).
        var retry: RetryState<ContinuousClock>?
        /// An answer held back whole because a validator reads its body.
        var heldHead: HTTPResponseHead?
        var heldBody: [UInt8] = []
        /// Counts tries, so a per-try timer of an earlier try does nothing.
        var tryNumber = 0
        /// No replay: already replayed once, or body bytes went upstream unbuffered.
        var replayed = false
        /// The credential generation each of the route's refreshers gave this try.
        var credentials: [Int] = []
        /// Set while a refused answer is read to its end; the retry waits this long after.
        var retryAfterDrain: Duration?

        init(requestHead: HTTPRequestHead, request: UpstreamRequest, route: Route, requestID: String,
             retry: RetryState<ContinuousClock>?, replayed: Bool = false) {
            self.requestHead = requestHead
            self.request = request
            self.route = route
            self.requestID = requestID
            self.retry = retry
            self.replayed = replayed
        }
    }

    init(slot: ListenerSlot, isStream: Bool) {
        self.slot = slot
        shared = slot.context
        self.isStream = isStream
        random = SplitMix64(seed: Self.processSeed ^ NIODeadline.now().uptimeNanoseconds)
        random = SplitMix64(seed: random.next() ^ UInt64(UInt(bitPattern: ObjectIdentifier(self).hashValue)))
    }

    private static let processSeed = UInt64.random(in: .min ... .max)

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        // Added once the protocol is known, the channel is usually active already.
        if context.channel.isActive { setDeadline(shared.config.limits.headerTimeout) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        if let call {
            self.call = nil
            call.connection?.abandon()
        }
        streaming = nil
        // The context holds this handler: keeping it would leak both (and the
        // channel) once the pipeline is gone — one per HTTP/2 stream.
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        setDeadline(shared.config.limits.headerTimeout)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        // HTTP/1.1 pipelining: the next request's parts wait until this answer
        // has ended. Reading goes on (no read-interest toggling per request,
        // as NIO's pipelining handler does); a long queue pauses it.
        if exchange.answering && !exchange.reading {
            exchange.queued.append(part)
            if exchange.queued.count == Self.maxQueuedParts { setClientReading(false) }
            return
        }
        process(part)
    }

    /// Request parts of a later pipelined request held at most (then reading pauses).
    static let maxQueuedParts = 64

    /// Where this HTTP/1.1 connection is between requests and answers.
    private struct Exchange {
        /// The current request's head arrived and its end has not.
        var reading = false
        /// Its answer has not ended yet.
        var answering = false
        var queued = CircularBuffer<HTTPServerRequestPart>()
        /// Draining: the answer in flight is the last one.
        var quiescing = false
    }

    private var exchange = Exchange()

    private func process(_ part: HTTPServerRequestPart) {
        switch part {
        case .head(let head):
            exchange.reading = true
            exchange.answering = true
            shared = slot.context
            clearDeadline()
            log = AccessLog.Entry(method: head.method.rawValue, target: head.uri)
            routeMetrics = nil
            received(head)
        case .body(let buffer):
            if streaming != nil {
                streamBody(buffer)
            } else if head != nil, !tooLarge {
                if body.count + buffer.readableBytes > shared.config.limits.maxBodyBytes {
                    tooLarge = true
                    body = []
                } else {
                    body.append(contentsOf: buffer.readableBytesView)
                }
            }
        case .end:
            exchange.reading = false
            if streaming != nil {
                streamEnd()
            } else if let head {
                self.head = nil
                handleBuffered(head)
            }
        }
    }

    // MARK: Request

    private func received(_ head: HTTPRequestHead) {
        let limits = shared.config.limits
        if head.headers.reduce(0, { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 }) > limits.maxHeaderBytes {
            return answer(Problem(status: 431, code: "headers-too-large", title: "Request header fields too large",
                                  detail: "the headers exceed limits.max_header_bytes (\(limits.maxHeaderBytes))"),
                          to: head, close: true)
        }
        guard head.uri.hasPrefix("/") else {
            return answer(Problem(status: 400, code: "bad-target", title: "Bad request target",
                                  detail: "only origin-form targets (/path?query) are accepted; the gateway is not an open proxy"),
                          to: head, close: true)
        }
        let path = String(head.uri.prefix { $0 != "?" })
        let headers = clientHeaders(head)
        let hasBody = head.headers.contains(name: "Content-Length") && head.headers["Content-Length"].first != "0"
            || head.headers.contains(name: "Transfer-Encoding")
        guard let match = shared.router.match(method: head.method.rawValue, path: path, host: headers["Host"], headers: headers) else {
            // An unread body would have to be drained first; closing is simpler and safe.
            return answer(.noRoute(method: head.method.rawValue, path: path), to: head, close: hasBody)
        }
        log.route = match.route.config.name
        routeMetrics = match.route.metrics
        if hasBody, match.route.streamsBody(method: head.method.rawValue) {
            startStreaming(head, match: match, headers: headers)
        } else {
            self.head = head
            self.match = match
            requestHeaders = headers
            body.removeAll(keepingCapacity: true)
            tooLarge = false
        }
    }

    private func clientHeaders(_ head: HTTPRequestHead) -> HeaderList {
        var headers = HeaderList(head.headers)
        if !headers.contains("Host"), let authority = headers[":authority"] { headers.set("Host", authority) }
        return headers
    }

    /// The peer's address as text, formatted once per connection or stream.
    private lazy var peerAddress = context.channel.remoteAddress?.ipAddress ?? "unknown"

    private func clientInfo(_ headers: HeaderList) -> ClientInfo {
        let client = ClientInfo(address: peerAddress, scheme: shared.scheme,
                                requestID: ClientInfo.requestID(from: headers, random: &random))
        log.requestID = client.requestID
        return client
    }

    /// Runs the embedder's hooks (an async hop, taken only when there are
    /// hooks), then `proceed` on this event loop with the modified request.
    private func modify(
        _ request: UpstreamRequest, route: Route, client: ClientInfo, head: HTTPRequestHead,
        proceed: @escaping (UpstreamRequest) -> Void
    ) {
        guard !shared.modifiers.isEmpty else { return proceed(request) }
        let modifiers = shared.modifiers
        let hookContext = ModifierContext(route: route.config.name, upstream: route.upstream.name, client: client)
        let promise = context.eventLoop.makePromise(of: UpstreamRequest.self)
        promise.completeWithTask {
            var request = request
            for modifier in modifiers { try await modifier.modify(&request, context: hookContext) }
            try request.checkWireSafe(route: hookContext.route)
            return request
        }
        promise.futureResult.whenComplete { [self] result in
            // The call ended meanwhile (client gone, deadline): nothing to answer.
            guard call != nil else { return }
            switch result {
            case .success(let modified):
                proceed(modified)
            case .failure(let error):
                call = nil
                endStreaming()
                let problem = error as? Problem
                    ?? Problem(status: 500, code: "modifier-failed", title: "A request modifier failed", detail: "\(error)", route: route.config.name)
                answer(problem, to: head, requestID: client.requestID, close: streaming != nil)
            }
        }
    }

    private func handleBuffered(_ head: HTTPRequestHead) {
        guard let match else { return }
        self.match = nil
        if tooLarge {
            return answer(Problem(status: 413, code: "body-too-large", title: "Request body too large",
                                  detail: "the body exceeds limits.max_body_bytes (\(shared.config.limits.maxBodyBytes))", route: match.route.config.name),
                          to: head, close: true)
        }
        var headers = requestHeaders
        requestHeaders = HeaderList()
        let route = match.route, upstream = route.upstream
        headers.remove("Content-Length")
        headers.remove("Transfer-Encoding")
        if !body.isEmpty { headers.add("Content-Length", String(body.count)) }
        let client = clientInfo(headers)
        let request: UpstreamRequest
        do {
            request = try UpstreamRequest.build(method: head.method.rawValue, target: head.uri, headers: headers, body: body,
                                                route: route.config, upstream: upstream, captures: match.captures, client: client)
        } catch {
            return answer(error, to: head, requestID: client.requestID)
        }
        if upstream.isEcho {
            var responseHeaders: HeaderList = ["Content-Type": "application/json", "X-Request-Id": client.requestID]
            route.config.responseHeaders.apply(to: &responseHeaders)
            return answer(status: 200, headers: responseHeaders, body: EchoUpstream.response(to: request), to: head)
        }
        call = Call(requestHead: head, request: request, route: route, requestID: client.requestID,
                    retry: retryState(route, method: request.method, replayable: true))
        setDeadline(route.config.timeout ?? Self.defaultTimeout)
        modify(request, route: route, client: client, head: head) { [self] modified in
            var modified = modified
            // Content-Length stays true to the bytes sent, whatever a hook did to the body.
            if let body = modified.body, !body.isEmpty {
                modified.headers.set("Content-Length", String(body.count))
            } else {
                modified.body = nil
                modified.headers.remove("Content-Length")
            }
            call?.request = modified
            forward()
        }
    }

    /// The body goes upstream as it arrives: the client's framing (length or
    /// chunked) is kept, and reading pauses whenever the upstream cannot take more.
    private func startStreaming(_ head: HTTPRequestHead, match: Router.Match, headers: HeaderList) {
        let client = clientInfo(headers)
        let route = match.route
        var request: UpstreamRequest
        do {
            request = try UpstreamRequest.build(method: head.method.rawValue, target: head.uri, headers: headers, body: [],
                                                route: route.config, upstream: route.upstream, captures: match.captures, client: client)
        } catch {
            return answer(error, to: head, requestID: client.requestID, close: true)
        }
        if !request.headers.contains("Content-Length") { request.headers.set("Transfer-Encoding", "chunked") }
        streaming = Streaming()
        call = Call(requestHead: head, request: request, route: route, requestID: client.requestID,
                    retry: retryState(route, method: request.method, replayable: false), replayed: true)
        setClientReading(false)
        setDeadline(route.config.timeout ?? Self.defaultTimeout)
        modify(request, route: route, client: client, head: head) { [self] modified in
            call?.request = modified
            forward()
        }
    }

    private func streamBody(_ buffer: ByteBuffer) {
        guard var state = streaming else { return }
        if state.connected, let connection = call?.connection {
            connection.sendBody(buffer)
            if !connection.channel.isWritable { setClientReading(false) }
        } else if call != nil {
            state.pending.append(buffer)
            streaming = state
        }
    }

    private func streamEnd() {
        guard var state = streaming else { return }
        state.ended = true
        streaming = state
        if state.connected, let connection = call?.connection {
            connection.sendEnd()
            streaming = nil
        } else if call == nil {
            // The call already ended (answered early or failed): nothing to send.
            streaming = nil
            setClientReading(true)
        }
    }

    private func setClientReading(_ on: Bool) {
        context.channel.setOption(ChannelOptions.autoRead, value: on).whenComplete { _ in }
    }

    /// `retry.per_try_timeout`: a try that has not answered in time fails as
    /// `timeout` (which the retry conditions may retry).
    private func armPerTryTimeout() {
        guard let call, let perTry = call.route.config.retry?.perTryTimeout else { return }
        call.tryNumber += 1
        let number = call.tryNumber
        context.eventLoop.scheduleTask(in: perTry.timeAmount) { [self] in
            guard let current = self.call, current.tryNumber == number, !current.responseHeadSent, let connection = current.connection else { return }
            connection.abandon()
            upstreamFailed(.timeout("no answer within per_try_timeout"), responseStarted: false)
        }
    }

    /// Lets a held answer through as it is: its head, what was held of the
    /// body, and from now on the rest as it arrives (too large to hold, or
    /// the validators accepted it).
    private func releaseHeldAnswer() {
        guard let head = call?.heldHead, let body = call?.heldBody else { return }
        call?.heldHead = nil
        call?.heldBody = []
        writeHead(head)
        if !body.isEmpty {
            log.bytes += body.count
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
        }
    }

    func upstreamReadComplete() {
        if call?.responseHeadSent == true { context.flush() }
    }

    func upstreamWritabilityChanged(_ writable: Bool) {
        if writable, streaming?.connected == true { setClientReading(true) }
    }

    static let defaultTimeout = Duration.seconds(60)

    private func retryState(_ route: Route, method: String, replayable: Bool) -> RetryState<ContinuousClock>? {
        let config = route.config
        guard config.retry != nil || !config.validate.isEmpty || !shared.validators.isEmpty else { return nil }
        route.retryBudget?.callStarted()
        return RetryState(policy: config.retry, validators: config.validate, custom: shared.validators, route: config.name,
                          method: method, replayable: replayable, deadline: .now + (config.timeout ?? Self.defaultTimeout))
    }

    /// Consults the call's retry state for one try's outcome; returns true when
    /// the handler took care of it (a retry is scheduled, or the call failed).
    /// `answerComplete`: the connection already finished its answer (and went
    /// back to its pool), so it is not abandoned.
    private func decide(_ outcome: TryOutcome, upstreamStatus: Int?, answerComplete: Bool = false) -> Bool {
        guard let call, var retry = call.retry else { return false }
        if answerComplete { call.connection = nil }
        let action = retry.tryFinished(outcome, now: .now, random: &random)
        call.retry = retry
        self.call = call
        var decided = action
        switch action {
        case .retry, .refreshThenRetry:
            if let budget = call.route.retryBudget, !budget.takeRetry() { decided = .giveUp(reason: "retry budget spent") }
        default: break
        }
        logTry(outcome, decided, retry)
        switch decided {
        case .accept, .giveUp:
            return false
        case .refreshThenRetry(let spec):
            return refreshThenRetry(spec, call: call)
        case .fail(let validator):
            call.connection?.abandon()
            self.call = nil
            clearDeadline()
            let status = upstreamStatus.map { " (upstream status \($0))" } ?? ""
            answer(Problem(status: 502, code: "validator-failed", title: "Upstream answer refused",
                           detail: "\(validator) refused the answer of upstream \(call.route.upstream.name)\(status)",
                           route: call.route.config.name), to: call.requestHead, requestID: call.requestID)
            return true
        case .retry(let delay, _):
            log.upstreamStatus = nil
            // A small refused answer is read to its end, so its connection
            // goes back to the pool instead of being closed and re-opened.
            if case .response(_, let headers, _) = outcome, call.connection != nil,
                let length = headers["Content-Length"].flatMap(Int.init), length <= Self.drainLimit
            {
                call.retryAfterDrain = delay
                return true
            }
            call.connection?.abandon()
            call.connection = nil
            self.retry(after: delay)
            return true
        }
    }

    /// Answers up to this size that decided a retry are drained, not dropped with their connection.
    static let drainLimit = 64 * 1024

    private func retry(after delay: Duration) {
        guard delay > .zero else { return forward() }
        context.eventLoop.scheduleTask(in: delay.timeAmount) { [self] in
            if self.call != nil { forward() }
        }
    }

    /// The refused answer being drained ended (or its connection failed):
    /// the retry starts.
    private func drained() -> Bool {
        guard let call, let delay = call.retryAfterDrain else { return false }
        call.retryAfterDrain = nil
        call.connection = nil
        retry(after: delay)
        return true
    }

    /// The route's `refresh` action: take a newer credential, or wait for the
    /// one refresh under way, then replay. A refresh capped by `min_interval`
    /// lets the refused answer through; a failed one fails the call with 502.
    private func refreshThenRetry(_ spec: RefreshSpec, call: Call) -> Bool {
        guard let index = call.route.refreshers.firstIndex(where: { $0.spec == spec }) else { return false }
        let refresher = call.route.refreshers[index]
        let start = refresher.refresh(after: call.credentials[index], on: context.eventLoop) {
            let pool = shared.pools.pool(for: context.eventLoop)
            let timeout = call.route.config.retry?.perTryTimeout ?? call.route.config.timeout ?? Self.defaultTimeout
            return pool.exchange(spec.request(to: refresher.upstream), upstream: refresher.upstream, timeout: timeout,
                                 maxBodyBytes: shared.config.limits.maxBodyBytes)
                .flatMapThrowing { answer in try spec.capture(status: answer.status, body: answer.body) }
                .always { call.route.metrics.refreshFinished(ok: (try? $0.get()) != nil) }
        }
        let route = call.route
        route.metrics.refresh(start)
        if case .throttled = start {
            shared.accessLog.logger.warning("refresh skipped: min_interval not passed", metadata: ["route": .string(route.config.name)])
            return false
        }
        call.connection?.abandon()
        self.call?.connection = nil
        log.upstreamStatus = nil
        switch start {
        case .ready, .throttled:
            forward()
        case .wait(let credential):
            credential.whenComplete { [self] result in
                guard let call = self.call else { return }
                switch result {
                case .success: forward()
                case .failure(let error):
                    self.call = nil
                    clearDeadline()
                    answer(Problem(status: 502, code: "refresh-failed", title: "Credential refresh failed",
                                   detail: "refreshing through upstream \(refresher.upstream.name) failed: \(error)", route: route.config.name),
                           to: call.requestHead, requestID: call.requestID)
                }
            }
        }
        return true
    }

    /// The captured credentials go into every try of the route.
    private func applyCredentials() {
        guard let refreshers = call?.route.refreshers, !refreshers.isEmpty else { return }
        var credentials: [Int] = []
        for refresher in refreshers {
            let credential = refresher.current
            credentials.append(credential.generation)
            if let value = credential.value { call?.request.headers.set(refresher.spec.captureHeader, value) }
        }
        call?.credentials = credentials
    }

    private func forward() {
        applyCredentials()
        guard let call else { return }
        let pool = shared.pools.pool(for: context.eventLoop)
        // An idle pooled connection is used at once: no future, no callback.
        if let connection = pool.takeIdle(call.route.upstream) { return send(on: connection) }
        pool.acquire(call.route.upstream).whenComplete { [self] result in
            guard self.call != nil else {
                // The call ended (deadline, client gone) while we waited.
                if case .success(let connection) = result { connection.giveBack() }
                return
            }
            switch result {
            case .success(let connection):
                send(on: connection)
            case .failure(let error):
                let upstreamError = error as? UpstreamError ?? .connectFailure("\(error)")
                upstreamFailed(upstreamError, responseStarted: false)
            }
        }
    }

    private func send(on connection: UpstreamConnection) {
        guard let call else { return }
        call.connection = connection
        call.route.metrics.tries.increment()
        armPerTryTimeout()
        guard var state = streaming else { return connection.send(call.request, delegate: self) }
        connection.sendHead(call.request, delegate: self)
        for buffer in state.pending { connection.sendBody(buffer) }
        state.pending = []
        state.connected = true
        if state.ended {
            connection.sendEnd()
            streaming = nil
        } else {
            streaming = state
            if connection.channel.isWritable { setClientReading(true) }
        }
    }

    // MARK: Response

    func upstreamHead(_ upstreamHead: HTTPResponseHead) {
        if call?.retry != nil,
            call?.route.config.validate.contains(where: \.readsBody) == true || shared.validators.contains(where: \.readsBody)
        {
            call?.heldHead = upstreamHead
            call?.heldBody = []
            return
        }
        if call?.retry != nil {
            let status = Int(upstreamHead.status.code)
            if decide(.response(status: status, headers: HeaderList(upstreamHead.headers), body: nil), upstreamStatus: status) { return }
        }
        writeHead(upstreamHead)
    }

    /// The answer's head goes to the client, edited in NIO's form (no conversion).
    private func writeHead(_ upstreamHead: HTTPResponseHead) {
        guard let call else { return }
        var nioHeaders = upstreamHead.headers
        nioHeaders.removeHopByHop()
        nioHeaders.replaceOrAdd(name: "X-Request-Id", value: call.requestID)
        call.route.config.responseHeaders.apply(to: &nioHeaders)
        if !call.requestHead.isKeepAlive || exchange.quiescing { nioHeaders.replaceOrAdd(name: "Connection", value: "close") }
        call.responseHeadSent = true
        log.upstreamStatus = Int(upstreamHead.status.code)
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: call.requestHead.version, status: upstreamHead.status,
                                                              headers: nioHeaders))), promise: nil)
    }

    func upstreamBody(_ buffer: ByteBuffer) {
        guard call != nil, call?.retryAfterDrain == nil else { return }
        if call?.heldHead != nil {
            call?.heldBody.append(contentsOf: buffer.readableBytesView)
            if call!.heldBody.count > shared.config.limits.maxBodyBytes { releaseHeldAnswer() }
            return
        }
        log.bytes += buffer.readableBytes
        // Flushed once per upstream read batch (upstreamReadComplete), not per part.
        context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        if !context.channel.isWritable { call?.connection?.setReading(false) }
    }

    func upstreamEnd() {
        if drained() { return }
        if let held = call?.heldHead, let body = call?.heldBody {
            let headers = HeaderList(held.headers)
            let status = Int(held.status.code)
            if decide(.response(status: status, headers: headers, body: body), upstreamStatus: status, answerComplete: true) { return }
            releaseHeldAnswer()
        }
        guard let call else { return }
        self.call = nil
        clearDeadline()
        endStreaming()
        record(status: log.upstreamStatus ?? 0, outcome: "ok")
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        finishExchange(keepAlive: call.requestHead.isKeepAlive, done: done)
    }

    func upstreamFailed(_ error: UpstreamError, responseStarted: Bool) {
        guard let call else { return }
        if drained() { return }
        // A reused keep-alive connection the upstream closed as we sent: the
        // request never reached it, so replay once on a fresh connection.
        if !responseStarted, decide(.failure(error), upstreamStatus: nil) { return }
        if !responseStarted, !call.replayed, error.name == "reset", let connection = call.connection, connection.uses > 1 {
            self.call?.replayed = true
            self.call?.connection = nil
            return forward()
        }
        self.call = nil
        clearDeadline()
        endStreaming()
        if call.responseHeadSent {
            // The answer is cut short: never pretend it ended.
            record(status: log.upstreamStatus ?? 0, outcome: "cut-short-\(error.name)")
            context.close(promise: nil)
            return
        }
        // A try that timed out is a gateway timeout, as nginx and Envoy answer it.
        let problem = Problem(status: error.name == "timeout" ? 504 : 502, code: "upstream-\(error.name)", title: "Upstream failed",
                              detail: "upstream \(call.route.upstream.name): \(error.detail)", route: call.route.config.name)
        answer(problem, to: call.requestHead, requestID: call.requestID)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { call?.connection?.setReading(true) }
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

    /// The call is over while the client may still be sending its body: keep
    /// reading it (and drop it) so the connection's framing stays intact.
    private func endStreaming() {
        guard var state = streaming else { return }
        state.pending = []
        state.connected = false
        streaming = state.ended ? nil : state
        setClientReading(true)
    }

    // MARK: Timers

    /// One timer per connection or stream, re-armed lazily: each call only
    /// moves `deadline` (header, idle or route timeout); the scheduled task is
    /// replaced only when the new deadline is earlier than the one it waits for.
    private func setDeadline(_ duration: Duration) {
        let deadline = NIODeadline.now() + duration.timeAmount
        self.deadline = deadline
        if let scheduledFor, scheduledFor <= deadline, timer != nil { return }
        schedule(at: deadline)
    }

    private func clearDeadline() { deadline = nil }

    private func schedule(at when: NIODeadline) {
        timer?.cancel()
        scheduledFor = when
        timer = context.eventLoop.scheduleTask(deadline: when) { [self] in
            timer = nil
            scheduledFor = nil
            guard let deadline else { return }
            if deadline > NIODeadline.now() { return schedule(at: deadline) }
            self.deadline = nil
            timerFired()
        }
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
        endStreaming()
        if call.responseHeadSent {
            record(status: log.upstreamStatus ?? 0, outcome: "cut-short-deadline")
            context.close(promise: nil)
        } else {
            answer(Problem(status: 504, code: "deadline", title: "Upstream took too long",
                           detail: "no complete answer from upstream \(call.route.upstream.name) within the route's timeout",
                           route: call.route.config.name),
                   to: call.requestHead, requestID: call.requestID)
        }
    }

    // MARK: Answers of our own

    private func answer(_ problem: Problem, to head: HTTPRequestHead, requestID: String? = nil, close: Bool = false) {
        log.route = problem.route ?? log.route
        var headers: HeaderList = ["Content-Type": Problem.contentType]
        if let requestID { headers.add("X-Request-Id", requestID) }
        answer(status: problem.status, headers: headers, body: problem.json, to: head, close: close)
    }

    private func answer(status: Int, headers: HeaderList, body: [UInt8], to head: HTTPRequestHead, close: Bool = false) {
        var nioHeaders = headers.httpHeaders
        nioHeaders.replaceOrAdd(name: "Content-Length", value: String(body.count))
        let keepAlive = head.isKeepAlive && !close && !exchange.quiescing
        if !keepAlive { nioHeaders.replaceOrAdd(name: "Connection", value: "close") }
        let responseHead = HTTPResponseHead(version: head.version, status: HTTPResponseStatus(statusCode: status), headers: nioHeaders)
        log.bytes = body.count
        record(status: status, outcome: status < 400 ? "ok" : "gateway")
        context.write(wrapOutboundOut(.head(responseHead)), promise: nil)
        if head.method != .HEAD {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
        }
        finishExchange(keepAlive: keepAlive, done: context.writeAndFlush(wrapOutboundOut(.end(nil))))
    }

    /// The call is over: its access log line and metrics.
    private func record(status: Int, outcome: String) {
        shared.accessLog.record(log, status: status, outcome: outcome)
        (routeMetrics ?? shared.metrics.unrouted).callEnded(method: log.method, status: status, started: log.start)
    }

    /// One line per try on routes with a validator chain or retries: the try's
    /// outcome, what decided, and what happens next.
    private func logTry(_ outcome: TryOutcome, _ action: RetryState<ContinuousClock>.Action, _ retry: RetryState<ContinuousClock>) {
        let metrics = routeMetrics ?? shared.metrics.unrouted
        let result: String
        switch outcome {
        case .response(let status, _, _): result = String(status)
        case .failure(let error): result = error.name
        }
        var next: String, delay = Duration.zero
        switch action {
        case .accept: next = "accept"
        case .fail: next = "fail"
        case .giveUp(let reason): next = "give-up: \(reason)"
        case .retry(let after, let reason):
            next = "retry"
            delay = after
            metrics.retried(reason: reason)
        case .refreshThenRetry: next = "refresh"
        }
        if let decider = retry.decidedBy { metrics.validator(decider, action: next.prefix { $0 != ":" }.description) }
        guard shared.accessLog.enabled else { return }
        shared.accessLog.logger.info("try", metadata: [
            "route": .string(log.route), "request_id": .string(log.requestID), "try": .stringConvertible(retry.tries),
            "result": .string(result), "decided_by": .string(retry.decidedBy ?? "-"), "next": .string(next),
            "delay_ms": .stringConvertible(delay.nanosecondCount / 1_000_000),
        ])
    }

    private func finishExchange(keepAlive: Bool, done: EventLoopFuture<Void>) {
        exchange.answering = false
        guard keepAlive, !exchange.quiescing else {
            exchange.queued.removeAll()
            done.whenComplete { [context] _ in context?.close(promise: nil) }
            return
        }
        if isStream { return }
        setDeadline(shared.config.limits.idleTimeout)
        // Pipelined requests read meanwhile go on, one answer at a time.
        let wasFull = exchange.queued.count >= Self.maxQueuedParts
        while let part = exchange.queued.popFirst() {
            process(part)
            if exchange.answering && !exchange.reading { break }
        }
        if wasFull && exchange.queued.count < Self.maxQueuedParts { setClientReading(true) }
    }

    /// Graceful stop (drain): an idle connection closes now; one with a call
    /// in flight answers it with `Connection: close`, then closes.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is ChannelShouldQuiesceEvent, !isStream else { return context.fireUserInboundEventTriggered(event) }
        exchange.quiescing = true
        exchange.queued.removeAll()
        if !exchange.reading && !exchange.answering { context.close(promise: nil) }
    }
}
