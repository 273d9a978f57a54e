import NIOCore
import NIOHTTP1
import Rewriter

/// The client's side of one exchange at a time, on an HTTP/1.1 connection
/// or an HTTP/2 stream: reading the request (a route that rewrites buffers
/// its body, up to `limits.max_body_bytes`), admitting it (`CallAdmission`),
/// the client-side waits, the gateway's own answers, and the exchange's
/// record, written once. It hands the runner (`CallRunner`) each call to
/// start and never calls it back: the runner calls this to answer. A class:
/// ending a response may start the next pipelined request inside it.
final class ClientExchange {
    let slot: ListenerSlot
    /// The listener's context as of this exchange's request head (a reload
    /// swaps the slot's; a call in flight keeps its own), as this loop uses it.
    var loopContext: LoopContext
    var listener: ListenerContext { loopContext.listener }
    /// Where answers go.
    let client: any ClientSide
    /// Where the connection or stream is between requests and responses:
    /// its machine's, the one value both sides move.
    var exchange: ExchangeStateMachine<LoopInstant> {
        get { client.exchange }
        // In place: every event of a call moves it, and a copy out and back costs each time.
        _modify { yield &client.exchange }
    }
    /// Request ids, endpoints and span ids come from this: no syscall per call.
    var random: SplitMix64
    /// What the exchange leaves behind: access line, spans, route metrics.
    var record = CallRecord()
    /// The instant of the event being handled (`atEvent`): the
    /// machines, timers, log line and metrics one event touches share one
    /// clock read, as nginx reads its clock once per turn of its event loop.
    var eventInstant: NIODeadline?

    /// The buffered request being read: its head, its headers in our form
    /// (converted once), its admission, its body so far.
    private var head: RequestHead?
    private var admitted: CallAdmission.Admitted?
    private var body: [UInt8] = []

    /// A call to start, with its retry state (nil: a tunnel, which validators do not judge).
    struct Start {
        let call: Call
        let retry: RetryState<LoopInstant>?
    }

    init(slot: ListenerSlot, client: any ClientSide, seed: UInt64) {
        self.slot = slot
        loopContext = LoopContext(slot.listener, eventLoop: client.eventLoop)
        self.client = client
        random = SplitMix64(seed: seed)
    }

    /// Now: the event's instant inside an event, else the event loop's
    /// clock (an embedded loop's is advanced by hand in tests).
    var now: NIODeadline { eventInstant ?? client.eventLoop.now }
    /// The same, as the state machines' instant.
    var loopNow: LoopInstant { LoopInstant(deadline: now) }

    /// Runs `body` as one event: one clock read for all of it (an event
    /// inside another keeps the outer one's instant).
    func atEvent<R>(_ body: () -> R) -> R {
        let started = eventStarted()
        defer { eventEnded(started) }
        return body()
    }

    /// `atEvent` as two calls, for a body that consumes what it was given
    /// (a closure can only copy it). Returns whether this started the event.
    func eventStarted() -> Bool {
        guard eventInstant == nil else { return false }
        eventInstant = client.eventLoop.now
        return true
    }

    func eventEnded(_ started: Bool) {
        if started { eventInstant = nil }
    }

    /// The connection is up: a request head must come within header_timeout.
    func started() { wake(at: exchange.connectionStarted(now: loopNow, headerTimeout: listener.config.limits.headerTimeout)) }

    /// A request head: answered here, buffered (its body follows), or a
    /// call whose body streams upstream as it arrives.
    func headArrived(_ head: consuming RequestHead) -> Start? {
        begin(head)
        if listener.openAPIDocument != nil, let document = openAPIDocument(for: head) {
            write(document)
            return nil
        }
        let framing = client.requestFraming
        let (traceID, hop, decision) = CallAdmission.admit(
            &head, client: .init(address: listener.trustedProxies.clientAddress(peer: client.peerAddress, forwardedFor: head.headers.values("X-Forwarded-For")),
                                 localAuthority: client.localAuthority, canTunnel: client.canTunnel, framing: framing),
            tracing: listener.config.tracing, limits: listener.config.limits, router: listener.router, random: &random,
            now: Double(now.uptimeNanoseconds) / 1e9)
        record.log.traceID = traceID
        if let hop, listener.spans != nil, hop.context.flags.contains(.sampled) {
            record.spans = CallSpans(hop: hop, method: record.log.method, target: record.log.target, client: record.log.client,
                                     protocolVersion: head.version.major == 2 ? "2" : "1.1", start: record.log.start)
        }
        let admitted: CallAdmission.Admitted
        switch decision {
        case .answered(let problem, let extraHeaders, let close, let route):
            if let route { record.onRoute(route) }
            respond(problem, to: head, extraHeaders: extraHeaders, close: close)
            return nil
        case .admitted(let decided):
            admitted = decided
        }
        record.onRoute(admitted.match.route)
        if admitted.answersContinue {
            client.write(.head(ResponseHead(version: head.version, status: .continue, headers: [:])))
            client.flush()
        }
        if admitted.streams { return streaming(consume head, admitted, framing: framing) }
        self.head = head
        self.admitted = admitted
        body.removeAll(keepingCapacity: true)
        wake(at: exchange.bodyExpected(now: loopNow, idleTimeout: listener.config.limits.idleTimeout))
        return nil
    }

    /// `openapi.path`'s document, answered before any route (GET and HEAD; a query is ignored).
    private func openAPIDocument(for head: RequestHead) -> OwnAnswer? {
        guard let document = listener.openAPIDocument, let path = listener.config.openapi.path, head.method == .GET || head.method == .HEAD,
            head.uri.prefix(while: { $0 != "?" }) == path
        else { return nil }
        let requestID = ClientInfo.requestID(from: head.headers, random: &random)
        record.log.requestID = requestID
        record.log.route = "openapi"
        return OwnAnswer(status: 200, headers: ["Content-Type": "application/json", "X-Request-Id": requestID, "Date": HTTPDate.format(HTTPDate.now())],
                         body: document, to: head, close: exchange.quiescing)
    }

    private func begin(_ head: RequestHead) {
        loopContext.update(slot.listener)
        record.start(head, at: now, client: client.peerAddress, proto: protocolName(head.version), readsUserAgent: listener.accessLog != nil)
    }

    /// A request refused before it was read whole (an HTTP/2 header block
    /// past the limit): answered and logged as any other.
    func refuse(_ head: RequestHead, _ problem: Problem) {
        begin(head)
        respond(problem, to: head, close: true)
    }

    /// A part of a buffered body: refused as soon as the body is too large
    /// (a chunked one), the rest not read.
    func bodyArrived(_ buffer: ByteBuffer) {
        // The head is not bound here: binding it would copy it for every part.
        guard head != nil else { return }
        let limits = listener.config.limits
        wake(at: exchange.bodyExpected(now: loopNow, idleTimeout: limits.idleTimeout))
        guard body.count + buffer.readableBytes <= limits.maxBodyBytes else {
            return refuseBuffered { .bodyTooLarge(limit: limits.maxBodyBytes, route: $0) }
        }
        body.append(contentsOf: buffer.readableBytesView)
    }

    /// The buffered request, answered with the problem made for its route:
    /// nothing more of it is read (no buffered request: the connection closes).
    func refuseBuffered(_ problem: (_ route: String?) -> Problem) {
        guard let head = head.take() else { return client.close() }
        let route = admitted.take()?.match.route.config.name
        body = []
        respond(problem(route), to: head, close: true)
    }

    /// The request ended: a buffered one becomes its call (or the echo's
    /// answer, or a problem when its upstream request cannot be made).
    func requestEnded() -> Start? {
        guard let head = head.take() else { return nil }
        return buffered(head)
    }

    private func buffered(_ head: consuming RequestHead) -> Start? {
        guard let admitted = admitted.take() else { return nil }
        let headers = head.takeFields()
        // The upstream's config is read in place (a local copy retains all of it).
        let route = admitted.match.route
        let authorized = route.cache != nil && headers.contains("Authorization")
        let client = clientInfo(headers)
        var request: UpstreamRequest
        do {
            request = try CallAdmission.upstreamRequest(admitted, method: head.method.rawValue, target: head.uri, headers: consume headers,
                                                        body: body, client: client)
        } catch {
            respond(error, to: head, requestID: client.requestID)
            return nil
        }
        if route.isEcho, route.filters.isEmpty, admitted.limit == nil {
            // The built-in upstream answers in process: still one try of it.
            answerEcho(OwnAnswer(echoing: request, requestID: client.requestID, rules: route.config.responseHeaders, to: head,
                                 close: exchange.quiescing), route: route)
            return nil
        }
        let retry = admitted.upgrade == nil ? RetryState<LoopInstant>(route: route, custom: listener.validators, method: request.method, replayable: true) : nil
        // Moved into the call: a copy would retain each of its strings and arrays.
        return Start(call: Call(requestHead: consume head, request: consume request, route: route, requestID: client.requestID, streams: false,
                                limit: admitted.limit, clientAuthorized: authorized, clientSentBody: !body.isEmpty),
                     retry: retry)
    }

    /// The body goes upstream as it arrives: the client's framing (length or
    /// chunked) is kept, and reading pauses until a connection takes it.
    private func streaming(_ head: consuming RequestHead, _ admitted: CallAdmission.Admitted, framing: RequestFraming) -> Start? {
        let headers = head.takeFields()
        let client = clientInfo(headers)
        let route = admitted.match.route
        var request: UpstreamRequest
        do {
            // One canonical length goes upstream, whatever spelling or
            // repetition the client's had (`05`, `5, 5`, two fields).
            request = try CallAdmission.upstreamRequest(admitted, method: head.method.rawValue, target: head.uri, headers: consume headers,
                                                        body: [], client: client, streamed: framing)
        } catch {
            respond(error, to: head, requestID: client.requestID, close: true)
            return nil
        }
        self.client.setReading(false)
        let retry = RetryState<LoopInstant>(route: route, custom: listener.validators, method: request.method, replayable: false)
        return Start(call: Call(requestHead: consume head, request: consume request, route: route, requestID: client.requestID, streams: true,
                                limit: admitted.limit),
                     retry: retry)
    }

    private func clientInfo(_ headers: HeaderList) -> ClientInfo {
        let client = ClientInfo(address: self.client.peerAddress, scheme: listener.scheme,
                                requestID: ClientInfo.requestID(from: headers, random: &random),
                                trustedPeer: listener.trustedProxies.contains(address: self.client.peerAddress))
        record.log.requestID = client.requestID
        return client
    }

    /// A try of `call` starts on `endpoint`: its span, named by the request's `traceparent`.
    func tryStarted(_ call: Call, on endpoint: Endpoint) {
        call.endpoint = endpoint
        guard let traceparent = record.tryStarted(method: call.request.method, endpoint: endpoint, now: now, random: &random, loopContext: &loopContext),
            // The first try's is usually in the request already (the same string: compared at once).
            call.request.headers["traceparent"] != traceparent
        else { return }
        call.request.headers.set("traceparent", traceparent)
    }

    /// As the access log names it.
    private func protocolName(_ version: HTTPVersion) -> String {
        if version.major == 2 { return listener.scheme == "https" ? "h2" : "h2c" }
        return version.minor == 0 ? "HTTP/1.0" : "HTTP/1.1"
    }

    /// A malformed request (bad framing, smuggling attempt), its call
    /// abandoned already: nothing after it on this connection can be
    /// trusted, so the connection closes, after `problem` unless the
    /// response has ended.
    func malformed(_ problem: Problem) {
        head = nil
        switch exchange.malformed() {
        case .close:
            client.close()
        case .answer(let forCurrentRequest):
            if !forCurrentRequest {
                // Only HTTP/1.1 connections read heads that can be malformed; who sent it is known.
                record.start(AccessLog.Entry(start: now, client: client.peerAddress, proto: "HTTP/1.1"))
            }
            // The head never parsed: the access line says why, as the answer does.
            record.log.reason = problem.logDetail ?? problem.detail
            respond(problem, to: RequestHead(method: .GET, uri: "/", version: .http1_1, headers: [:]), close: true)
        }
    }

    /// The connection or stream is gone, its call abandoned already: logged
    /// as the client's doing (499, as nginx logs it) unless its line was
    /// written (a response cut short closes the connection too).
    func detach() {
        head = nil
        writeRecord(status: 499, outcome: "client-gone")
        exchange.clientGone()
    }

    /// How long a connection (HTTP/1.1) or stream (HTTP/2) whose answer ended
    /// before its request did keeps reading, and dropping, what still comes:
    /// idle_timeout, at most 5 seconds.
    var lingerTime: TimeAmount { min(.seconds(5), listener.config.limits.idleTimeout.timeAmount) }

    /// Graceful stop (drain): the response in flight is the last. Returns
    /// whether the connection is idle, to be closed now.
    func quiesce() -> Bool { exchange.quiesce() }
}
