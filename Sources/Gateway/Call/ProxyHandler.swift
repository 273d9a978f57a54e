import NIOCore
import NIOHTTP1
import Rewriter

/// One downstream call at a time — on an HTTP/1.1 connection (fed by its
/// HTTP1ConnectionHandler, which holds pipelined requests back until the
/// answer before them ends) or one HTTP/2 stream (fed by the connection's
/// HTTP2ServerHandler). No pipeline of its own: it speaks to its client
/// through `ClientSide`, whatever the protocol. A route
/// that rewrites buffers the request body (up to `limits.max_body_bytes`);
/// a pass-through route streams it upstream as it arrives, reading from the
/// client only as fast as the upstream takes it. Answers stream back part
/// by part on a pooled upstream connection of this event loop.
final class ProxyHandler: UpstreamResponseDelegate {
    typealias CallMachine = CallStateMachine<LoopInstant>

    let slot: ListenerSlot
    /// The listener's context as of this call's request head (a reload
    /// swaps the slot's; a call in flight keeps its own), as this loop uses it.
    var context: LoopContext
    var shared: ListenerContext { context.shared }
    /// Where answers go.
    let client: any ClientSide

    /// The request being read.
    var head: RequestHead?
    /// Its headers in our form, converted once.
    var requestHeaders = HeaderList()
    var admitted: CallAdmission.Admitted?
    var body: [UInt8] = []

    /// The call in flight: what it carries. Its lifecycle is `machine`'s.
    var call: Call?
    var machine = CallMachine()
    /// Where the connection or stream is between requests and responses.
    var exchange = ExchangeStateMachine<LoopInstant>()
    /// Request ids come from this: no syscall per call or per HTTP/2 stream.
    var random: SplitMix64
    /// What the exchange leaves behind: access line, spans, route metrics.
    var record = CallRecord()
    /// The instant of the event being handled (`atEvent`): the machines,
    /// timers, log line and metrics one event touches share one clock read,
    /// as nginx reads its clock once per turn of its event loop.
    private var eventInstant: NIODeadline?

    init(slot: ListenerSlot, client: any ClientSide) {
        self.slot = slot
        context = LoopContext(slot.context, eventLoop: client.eventLoop)
        self.client = client
        random = SplitMix64(seed: Self.processSeed ^ NIODeadline.now().uptimeNanoseconds)
        random = SplitMix64(seed: random.next() ^ UInt64(UInt(bitPattern: ObjectIdentifier(self).hashValue)))
    }

    static let processSeed = UInt64.random(in: .min ... .max)

    /// The connection or stream is gone: the call in flight is abandoned,
    /// and logged as the client's doing (499, as nginx logs it).
    func detach() {
        abandonCall()
        machine.bodyGone()
        head = nil
        // Logged unless its line was written (a response cut short closes the connection too).
        writeRecord(status: 499, outcome: "client-gone")
        exchange.clientGone()
    }

    /// The connection is up: a request head must come within header_timeout.
    func started() { wake(at: exchange.connectionStarted(now: loopNow, headerTimeout: shared.config.limits.headerTimeout)) }

    var pool: UpstreamPool { context.pool }

    /// Now: the event's instant inside `atEvent`, else the event loop's
    /// clock (an embedded loop's is advanced by hand in tests).
    var now: NIODeadline { eventInstant ?? client.eventLoop.now }
    /// The same, as the state machines' instant.
    var loopNow: LoopInstant { LoopInstant(deadline: now) }

    /// Runs `body` as one event: one clock read for all of it (an event
    /// inside another keeps the outer one's instant).
    func atEvent<R>(_ body: () -> R) -> R {
        guard eventInstant == nil else { return body() }
        eventInstant = client.eventLoop.now
        defer { eventInstant = nil }
        return body()
    }

    func process(_ part: RequestPart) { atEvent { handle(part) } }

    private func handle(_ part: RequestPart) {
        switch part {
        case .head(let head):
            begin(head)
            received(head)
        case .body(let buffer):
            if machine.streamed != nil {
                streamBody(buffer)
            } else if head != nil {
                // The head is not bound here: binding it would copy it for every part.
                wake(at: exchange.bodyExpected(now: loopNow, idleTimeout: shared.config.limits.idleTimeout))
                if body.count + buffer.readableBytes > shared.config.limits.maxBodyBytes, let head = head.take() {
                    // Refused as soon as it is too large (a chunked body): the rest is not read.
                    let route = admitted?.match.route.config.name
                    admitted = nil
                    body = []
                    return respond(.bodyTooLarge(limit: shared.config.limits.maxBodyBytes, route: route), to: head, close: true)
                }
                body.append(contentsOf: buffer.readableBytesView)
            }
        case .end:
            exchange.requestEnded()
            if machine.streamed != nil {
                streamEnd()
            } else if let head = head.take() {
                handleBuffered(consume head)
            }
        }
    }

    private func begin(_ head: RequestHead) {
        exchange.requestHead()
        context.update(slot.context)
        record = CallRecord(head, start: now, client: client.peerAddress, proto: protocolName(head.version),
                            readsUserAgent: shared.accessLog != nil)
    }

    /// A request refused before it was read whole (an HTTP/2 header block
    /// past the limit): answered and logged as any other.
    func refuse(_ head: RequestHead, _ problem: Problem) {
        begin(head)
        respond(problem, to: head, close: true)
    }

    func received(_ head: consuming RequestHead) {
        let framing = client.requestFraming
        let (traceID, hop, decision) = CallAdmission.admit(
            &head, client: .init(address: client.peerAddress, localAuthority: client.localAuthority, canTunnel: client.canTunnel, framing: framing),
            config: shared.config, router: shared.router, random: &random, now: Double(now.uptimeNanoseconds) / 1e9)
        record.log.traceID = traceID
        if let hop, shared.spans != nil, hop.context.flags.contains(.sampled) {
            record.spans = CallSpans(hop: hop, method: record.log.method, target: record.log.target, client: record.log.client, protocolVersion: head.version.major == 2 ? "2" : "1.1",
                              start: record.log.start)
        }
        let admitted: CallAdmission.Admitted
        switch decision {
        case .answered(let problem, let extraHeaders, let close, let route):
            if let route { record.onRoute(route) }
            return respond(problem, to: head, extraHeaders: extraHeaders, close: close)
        case .admitted(let decided):
            admitted = decided
        }
        record.onRoute(admitted.match.route)
        if admitted.answersContinue {
            client.write(.head(ResponseHead(version: head.version, status: .continue, headers: [:])))
            client.flush()
        }
        if admitted.streams {
            startStreaming(head, admitted, framing: framing)
        } else {
            self.head = head
            self.admitted = admitted
            requestHeaders = head.headers
            body.removeAll(keepingCapacity: true)
            wake(at: exchange.bodyExpected(now: loopNow, idleTimeout: shared.config.limits.idleTimeout))
        }
    }

    func clientInfo(_ headers: HeaderList) -> ClientInfo {
        let client = ClientInfo(address: self.client.peerAddress, scheme: shared.scheme,
                                requestID: ClientInfo.requestID(from: headers, random: &random))
        record.log.requestID = client.requestID
        return client
    }

    /// The route's filters run first, on this event loop; then the
    /// embedder's hooks as a task (an async hop, taken only when there are
    /// hooks), whose result comes back on this event loop.
    func runModifiers(_ token: CallMachine.Token) {
        guard let call else { return }
        if !call.route.filters.isEmpty, call.filters == nil { return runFilters(token, call) }
        guard !shared.modifiers.isEmpty else { return run(machine.modifiersFinished(token)) }
        let hookContext = ModifierContext(route: call.route.config.name, upstream: call.route.upstream.name,
                                          client: ClientInfo(address: client.peerAddress, scheme: shared.scheme, requestID: call.requestID))
        shared.modifiers.modify(call.request, context: hookContext, streams: call.streams, on: client.eventLoop).assumeIsolated().whenComplete {
            [self] result in
            // The call ended meanwhile (client gone, deadline): nothing to answer.
            guard machine.isCurrent(token), let call = self.call else { return }
            switch result {
            case .success(let modified):
                call.request = modified
                run(machine.modifiersFinished(token))
            case .failure(let error):
                endCall()
                endStreaming()
                respond(error as? Problem ?? .modifierFailed("\(error)", route: call.route.config.name), to: call.requestHead,
                        requestID: call.requestID, close: machine.streamed != nil)
            }
        }
    }

    /// Performs what the call's state machine decided.
    func run(_ action: CallMachine.Action) {
        switch action {
        case .ignore:
            return
        case .wake(let deadline):
            wake(at: deadline)
        case .timeOutCall(let forwarded):
            callTimedOut(forwarded: forwarded)
        case .runModifiers(let token):
            runModifiers(token)
        case .acquireConnection(let token):
            acquire(token)
        case .timeOutTry:
            call?.connection?.abandon()
            call?.connection = nil
            upstreamFailed(.timeout("no response within per_try_timeout"), progress: .sent)
        case .wait(let token, let delay):
            call?.backoff = client.eventLoop.assumeIsolated().scheduleTask(in: delay.timeAmount) { [self] in
                run(machine.backoffElapsed(token))
            }
        }
    }

    /// Starts the call's first try (through the modifiers, when there are any).
    func startCall(_ call: Call, retry: RetryState<LoopInstant>?) {
        self.call = call
        exchange.callStarted()
        let action = machine.start(now: loopNow, timeout: call.route.config.timeout ?? Self.defaultTimeout,
                                   runsModifiers: !shared.modifiers.isEmpty || !call.route.filters.isEmpty, perTryTimeout: call.route.config.retry?.perTryTimeout,
                                   retry: retry, streams: call.streams)
        if let deadline = machine.deadline { wake(at: deadline) }
        run(action)
    }

    /// The call is over: no deadline, no timer, no place in a pool's queue;
    /// every token it handed out is stale. Returns it for its last words.
    @discardableResult
    func endCall() -> Call? {
        guard let call else { return nil }
        self.call = nil
        machine.end()
        call.perTryTimer?.cancel()
        call.backoff?.cancel()
        call.filters?.end()
        if let waiter = call.waiter, let endpoint = call.endpoint { pool.cancel(waiter, endpoint: endpoint) }
        call.leavePending()
        return call
    }

    func handleBuffered(_ head: consuming RequestHead) {
        guard let admitted else { return }
        self.admitted = nil
        // Taken, not copied: editing a list still shared would copy it. The
        // head keeps its fields only when a Connection field is among them
        // (whether the client keeps the connection is read from it later).
        var headers = HeaderList()
        swap(&headers, &requestHeaders)
        if !head.headers.contains("Connection") { head.headers = HeaderList() }
        // The upstream's config is read in place (a local copy retains all of it).
        let route = admitted.match.route
        let client = clientInfo(headers)
        var request: UpstreamRequest
        do {
            request = try CallAdmission.upstreamRequest(admitted, method: head.method.rawValue, target: head.uri, headers: consume headers,
                                                        body: body, client: client)
        } catch {
            return respond(error, to: head, requestID: client.requestID)
        }
        if route.isEcho, route.filters.isEmpty {
            // The built-in upstream answers in process: still one try of it.
            route.metrics.tries?.increment()
            record.log.tries = 1
            record.log.upstreamStatus = 200
            return write(OwnAnswer(echoing: request, requestID: client.requestID, rules: route.config.responseHeaders, to: head,
                                   close: exchange.quiescing))
        }
        // Validators do not judge a tunnel.
        let retry = admitted.upgrade == nil ? RetryState<LoopInstant>(route: route, custom: shared.validators, method: request.method, replayable: true) : nil
        // Moved into the call: a copy would retain each of its strings and arrays.
        startCall(Call(requestHead: consume head, request: consume request, route: route, requestID: client.requestID, streams: false),
                  retry: retry)
    }

    func setClientReading(_ on: Bool) { client.setReading(on) }

    /// As the access log names it.
    func protocolName(_ version: HTTPVersion) -> String {
        if version.major == 2 { return shared.scheme == "https" ? "h2" : "h2c" }
        return version.minor == 0 ? "HTTP/1.0" : "HTTP/1.1"
    }

    static let defaultTimeout = Duration.seconds(60)
    /// How long a connection (HTTP/1.1) or stream (HTTP/2) whose answer ended
    /// before its request did keeps reading, and dropping, what still comes:
    /// idle_timeout, at most 5 seconds.
    var lingerTime: TimeAmount { min(.seconds(5), shared.config.limits.idleTimeout.timeAmount) }

    func clientBecameWritable() { call?.connection?.setReading(true) }

    /// A malformed request (bad framing, smuggling attempt): nothing after it
    /// on this connection can be trusted, so the connection closes, after
    /// `problem` unless the response has begun.
    func malformed(_ problem: Problem) {
        if machine.responseForwarded { return client.close() }
        abandonCall()
        machine.bodyGone()
        head = nil
        switch exchange.malformed() {
        case .close:
            client.close()
        case .answer(let forCurrentRequest):
            if !forCurrentRequest {
                // Only HTTP/1.1 connections read heads that can be malformed; who sent it is known.
                record = CallRecord()
                record.log = AccessLog.Entry(start: now, client: client.peerAddress, proto: "HTTP/1.1")
            }
            respond(problem, to: RequestHead(method: .GET, uri: "/", version: .http1_1, headers: [:]), close: true)
        }
    }

    /// The client is gone: the upstream connection of a call in flight is
    /// in an unknown state, so it is closed.
    func abandonCall() { endCall()?.connection?.abandon() }

    /// Ends the response; an HTTP/1.1 connection then reads its next request
    /// (within idle_timeout).
    func finishExchange(keepAlive: Bool) {
        let idleTimeout = client.carriesOneExchange ? nil : shared.config.limits.idleTimeout
        let (keepOpen, next) = exchange.responseEnded(keepAlive: keepAlive, now: loopNow, idleTimeout: idleTimeout)
        if let next { wake(at: next) }
        client.end(close: !keepOpen)
    }

    /// Graceful stop (drain): the response in flight is the last. Returns
    /// whether the connection is idle, to be closed now.
    func quiesce() -> Bool { exchange.quiesce() }
}
