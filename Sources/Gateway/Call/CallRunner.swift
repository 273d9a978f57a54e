import NIOCore
import NIOHTTP1
import Rewriter

/// The runner of one downstream call at a time — on an HTTP/1.1 connection
/// (fed by its HTTP1ConnectionHandler, which holds pipelined requests back
/// until the answer before them ends) or one HTTP/2 stream (fed by the
/// connection's HTTP2ServerHandler). Its client side (`ClientExchange`)
/// reads and admits each request. Every event goes to the call's state
/// machine, and `run` performs the one action it answers: filters and
/// modifiers, a pooled upstream connection of this event loop per try, the
/// answer streamed back part by part, timers, retries, credential refresh,
/// tunnels. Nothing here decides.
final class CallRunner: UpstreamResponseDelegate, PoolWaiter {
    typealias CallMachine = CallStateMachine<LoopInstant>

    /// The client's side of the call: reading, admitting, answering, the record.
    let downstream: ClientExchange
    /// Where answers go (`downstream.client`, kept here too: read through `downstream`, each use is retained).
    let client: any ClientSide
    /// The call in flight: what it carries. Its lifecycle is `machine`'s.
    var call: Call?
    var machine = CallMachine()

    init(slot: ListenerSlot, client: any ClientSide) {
        let seed = Self.processSeed ^ NIODeadline.now().uptimeNanoseconds ^ UInt64(UInt(bitPattern: ObjectIdentifier(client).hashValue))
        downstream = ClientExchange(slot: slot, client: client, seed: seed)
        self.client = client
    }

    static let processSeed = UInt64.random(in: .min ... .max)
    static let defaultTimeout = Duration.seconds(60)

    var listener: ListenerContext { downstream.listener }
    var now: NIODeadline { downstream.now }
    var loopNow: LoopInstant { downstream.loopNow }

    /// Whether a completion (a filter, a modifier, a pool wait) is the current try's.
    func isCurrent(_ token: CallMachine.Token) -> Bool { machine.isCurrent(token) }

    // MARK: Events from the client's connection or stream

    /// A request head, taken over (see `HTTP1ConnectionHandler.parse`).
    func requestHead(_ head: consuming RequestHead) {
        let event = downstream.eventStarted()
        defer { downstream.eventEnded(event) }
        if let start = downstream.headArrived(head) { startCall(start) }
    }

    func requestBody(_ buffer: ByteBuffer) {
        downstream.atEvent { run(machine.requestBody(buffer)) }
    }

    func requestEnded() {
        downstream.atEvent {
            if let start = downstream.requestEnded() { startCall(start) }
            run(machine.requestEnded())
        }
    }

    /// A malformed request (bad framing, smuggling attempt): the call is
    /// abandoned and the connection closes (cut, when the response has begun).
    func malformed(_ problem: Problem) {
        run(machine.malformedRequest(problem))
    }

    /// The connection or stream is gone: the call in flight is abandoned.
    func detach() {
        abandonCall()
        downstream.detach()
    }

    /// The timer woke: the call's deadline first, then the client-side wait.
    func deadlinePassed() {
        run(machine.deadlinePassed(now: loopNow))
        downstream.timerFired()
    }

    func clientBecameWritable() { call?.connection?.setReading(true) }

    // MARK: Events from the try's upstream connection

    /// The connect for this try failed (a try too); false when the try was over already.
    func connectFailed(_ error: UpstreamError, _ token: CallMachine.Token) -> Bool {
        let action = machine.connectFailed(token, error, now: loopNow, random: &downstream.random)
        if case .none = action { return false }
        call?.waiter = nil
        // A try that failed to connect is a try: the metric counts it as the access line does.
        call?.route.metrics.tries?.increment()
        downstream.record.tryFailed(error, now: now, loopContext: &downstream.loopContext)
        run(action)
        return true
    }

    func waits(on state: UpstreamState, _ token: CallMachine.Token) { call?.enterPending(state) }

    func queued(_ id: UpstreamPool.WaiterID?, _ token: CallMachine.Token) {
        if machine.isCurrent(token) { call?.waiter = id }
    }

    /// A stale try's call left the pending count when it ended.
    func waitEnded(_ token: CallMachine.Token) {
        if machine.isCurrent(token) { call?.leavePending() }
    }

    /// Whether the call took the connection (false: its try is over, the
    /// connection goes to someone else).
    func connectionReady(_ connection: any UpstreamConnection, _ token: CallMachine.Token) -> Bool {
        let action = machine.connectionReady(token)
        guard case .send = action else { return false }
        run(action, connection: connection)
        return true
    }

    func upstreamFailed(_ error: UpstreamError, progress: TryProgress) {
        guard call != nil else { return }
        downstream.record.tryFailed(error, now: now, loopContext: &downstream.loopContext)
        call?.connection = nil
        run(machine.tryFailed(error, progress: progress, now: loopNow, random: &downstream.random))
    }

    /// The upstream switched protocols: the call becomes a tunnel.
    func upstreamSwitched(_ head: ResponseHead, connection: any UpstreamConnection) {
        guard let call = endCall() else {
            connection.close()
            return client.close()
        }
        downstream.openTunnel(head, for: call, to: connection)
    }

    func upstreamHead(_ upstreamHead: consuming ResponseHead) {
        // Logged whatever the validators make of it.
        downstream.record.tryAnswered(status: Int(upstreamHead.status.code), now: now)
        // The call read once: each `call?.` retains and releases it.
        guard let call else { return }
        let action = machine.responseHead(upstreamHead, holdsBody: call.route.readsResponseBodies || listener.validatorsReadBodies, now: loopNow,
                                          random: &downstream.random)
        run(action, head: consume upstreamHead)
    }

    func upstreamBody(_ buffer: ByteBuffer) {
        run(machine.upstreamBody(buffer, limit: listener.config.limits.maxResponseBodyBytes))
    }

    func upstreamReadComplete() { run(machine.upstreamReadComplete()) }

    func upstreamWritabilityChanged(_ writable: Bool) {
        if writable { run(machine.upstreamWritable()) }
    }

    func upstreamEnd() {
        downstream.atEvent {
            // Its connection finished the response and went back to its pool.
            call?.connection = nil
            run(machine.responseEnded(now: loopNow, random: &downstream.random))
        }
    }

    /// What the hooks made of the request, now or later (`token`: the step that ran them).
    func hooksFinished(_ outcome: RequestHooks.Outcome, _ token: CallMachine.Token) {
        // The call ended meanwhile (client gone, deadline): nothing to answer.
        guard machine.isCurrent(token), let call else { return }
        // A filter let through by `fail_open` says so on the access line.
        if let reason = call.filters?.failureReason { downstream.record.log.reason = reason }
        guard case .end(let ending, let reason) = outcome else { return run(machine.modifiersFinished(token)) }
        if let reason { downstream.record.log.reason = reason }
        end(ending)
    }

    // MARK: The call

    /// Starts the call's first try (through the filters and modifiers, when there are any).
    func startCall(_ start: ClientExchange.Start) {
        let call = start.call
        call.cache = Self.cache(for: call)
        self.call = call
        downstream.exchange.callStarted()
        let deadline = loopNow.advanced(by: call.route.config.timeout ?? Self.defaultTimeout)
        downstream.wake(at: deadline)
        run(machine.start(deadline: deadline, runsModifiers: !listener.modifiers.isEmpty || !call.route.filters.isEmpty || call.limit != nil,
                          perTryTimeout: call.route.config.retry?.perTryTimeout, retry: start.retry, streams: call.streams,
                          translates: call.route.answer != nil, caches: call.cache != nil))
    }

    /// Performs what the call's state machine decided. `head`: the try's
    /// response head while it is judged; `connection`: the one that arrived for `.send`.
    func run(_ action: CallMachine.Action, head: consuming ResponseHead? = nil, connection: (any UpstreamConnection)? = nil) {
        switch action {
        case .none, .giveBack:
            return
        case .runModifiers(let token):
            if let call, let outcome = RequestHooks.run(call, for: self, token: token) { hooksFinished(outcome, token) }
        case .lookUp(let token):
            lookUp(token)
        case .acquireConnection(let token):
            acquire(token)
        case .send(let token, let tries, let perTryTimeout, let streamed):
            guard let call, let connection else { return }
            send(call, on: connection, token: token, tries: tries, perTryTimeout: perTryTimeout, streamed: streamed)
        case .bufferBody(let buffer):
            downstream.bodyArrived(buffer)
        case .sendBody(let buffer):
            guard let connection = call?.connection else { return }
            connection.sendBody(buffer)
            // Paused whenever the upstream cannot take more.
            if !connection.isWritable { client.setReading(false) }
        case .sendEnd:
            call?.connection?.sendEnd()
        case .resumeClient:
            client.setReading(true)
        case .wake(let deadline):
            downstream.wake(at: deadline)
        case .timeOutCall(let forwarded):
            guard client.isActive, let call else { return }
            call.dropConnection()
            end(forwarded ? .cut(outcome: "cut-short-deadline") : .problem(.deadline(on: call.route)))
        case .timeOutTry:
            call?.dropConnection()
            upstreamFailed(.timeout("no response within per_try_timeout"), progress: .sent)
        case .askBudget:
            run(machine.budgetAnswered(call?.route.takeRetry() ?? false), head: head.take())
        case .forwardHead(let end):
            tryEnded(end)
            if let taken = head.take() { forward(consume taken) }
        case .forwardBody(let buffer):
            downstream.record.log.bytes += buffer.readableBytes
            call?.cache?.bodyPart(buffer.readableBytesView, count: buffer.readableBytes)
            // Flushed once per upstream read batch (upstreamReadComplete), not per part.
            client.write(.body(buffer))
            if !client.isWritable { call?.connection?.setReading(false) }
        case .flush:
            client.flush()
        case .letThrough(let head, let body, let end):
            tryEnded(end)
            forward(head, held: body)
        case .writeHeld(let head, let body, let end):
            tryEnded(end)
            forward(head, held: body, whole: true)
            self.end(.complete)
        case .drain(let end):
            tryEnded(end)
            // Read to its end, so its connection goes back to the pool instead of being closed and re-opened.
            downstream.record.log.upstreamStatus = nil
        case .retry(let token, let delay, let end):
            tryEnded(end)
            downstream.record.tryDropped(now: now, loopContext: &downstream.loopContext)
            call?.dropConnection()
            run(delay > .zero ? .backOff(token, delay) : .acquireConnection(token))
        case .backOff(let token, let delay):
            call?.backoff = schedule(in: delay) { $0.backoffElapsed(token) }
        case .startRefresh(let spec, let token, let end):
            tryEnded(end)
            refresh(spec, token: token, head: head.take())
        case .refuse(let validator, let status, let end):
            tryEnded(end)
            guard let call else { return }
            call.dropConnection()
            downstream.record.log.reason = "\(validator) refused the response"
            self.end(.problem(.validatorFailed(status: status, on: call.route)))
        case .failTry(let error, let end):
            tryEnded(end)
            guard let call else { return }
            self.end(.problem(.upstreamFailed(error, on: call.route)))
        case .cutShort(let error, let end):
            tryEnded(end)
            self.end(.cut(outcome: "cut-short-\(error.name)"))
        case .translate(let head, let body):
            guard let call else { return }
            let translation = call.route.answer.map {
                AnswerTranslation.of(head, body, rule: $0, route: call.route.config, limit: listener.config.limits.maxResponseBodyBytes,
                                     judged: call.route.validatorsReadBodies || listener.validatorsReadBodies)
            } ?? .answer(document: body, head: head, body: body)
            run(machine.answerTranslated(translation, now: loopNow, random: &downstream.random))
        case .answerTooLarge(let end):
            tryEnded(end)
            guard let call else { return }
            call.dropConnection()
            self.end(.problem(.answerTooLarge(limit: listener.config.limits.maxResponseBodyBytes, route: call.route.config.name)))
        case .respond(let problem, let end):
            tryEnded(end)
            call?.dropConnection()
            self.end(.problem(problem))
        case .closeClient:
            client.close()
        case .rejectRequest(let problem):
            abandonCall()
            downstream.malformed(problem)
        case .finish:
            end(.complete)
        }
    }

    /// One of the call's timers: `event` is the machine's step when it fires.
    func schedule(in delay: Duration, _ event: @escaping (inout CallMachine) -> CallMachine.Action) -> Scheduled<Void> {
        client.eventLoop.assumeIsolated().scheduleTask(in: delay.timeAmount) { [self] in run(event(&machine)) }
    }

    /// The call is over: its client gets `ending` (or, for a failure, the
    /// stale answer its route's cache keeps for one).
    func end(_ ending: ClientExchange.Ending) {
        if case .problem(let problem, _, _) = ending, cacheFails(problem) { return }
        let call = endCall(complete: ending.isComplete)
        if let call { invalidateStored(by: call) }
        downstream.end(ending, call: call)
    }

    /// The call is over: every token it handed out is stale; `complete`: its
    /// answer reached its end (the cache stores it). Returns it for its last words.
    @discardableResult
    func endCall(complete: Bool = false) -> Call? {
        let call = call.take()
        // The client may still be sending its body: it is read (and dropped) so the connection's framing stays intact.
        run(machine.end())
        call?.end(pool: downstream.loopContext.pool)
        call?.cache?.finish(complete: complete)
        return call
    }

    /// The client is gone (or broke its framing): the upstream connection of
    /// a call in flight is in an unknown state, so it is closed; no more of its body comes.
    func abandonCall() {
        let call = call.take()
        run(machine.end(clientGone: true))
        call?.end(pool: downstream.loopContext.pool)
        call?.cache?.finish(complete: false)
        call?.dropConnection()
    }

    // MARK: A try

    /// A try starts on an endpoint the upstream's balance picks (another
    /// than the last try's, when one may take it); the built-in `echo`
    /// upstream answers at once. Past `max_requests` or `max_pending` the
    /// call is answered 503 at once instead of waiting for its deadline.
    private func acquire(_ token: CallMachine.Token) {
        guard let call else { return }
        call.takeCredentials()
        guard let state = listener.routeUpstreams[call.route.index] else {
            let answer = downstream.echo(call)
            endCall()
            return downstream.answerEcho(answer, route: call.route)
        }
        var breaker = state.breakerOpen(waiting: false)
        if breaker == nil {
            let endpoint = state.pick(exclude: call.endpoint?.index, random: downstream.random.next())
            downstream.tryStarted(call, on: endpoint)
            breaker = downstream.loopContext.pool.connection(to: endpoint, of: state, now: now, for: self, token: token)
        }
        guard let breaker else { return }
        // The upstream untouched: 503 with Retry-After.
        end(.problem(.overloaded(limit: breaker, on: call.route), headers: ["Retry-After": "1"], close: call.streams))
    }

    private func send(_ call: Call, on connection: any UpstreamConnection, token: CallMachine.Token, tries: Int, perTryTimeout: Duration?,
                      streamed: CallMachine.StreamedStart?) {
        call.attach(connection)
        call.route.metrics.tries?.increment()
        downstream.record.trySent(tries: tries, to: connection.peerAddress, now: now)
        if let perTryTimeout { call.perTryTimer = schedule(in: perTryTimeout) { $0.perTryTimerFired(token) } }
        guard let streamed else { return connection.send(call.request, delegate: self) }
        guard connection.sendStreamed(call.request, parts: streamed.pending, end: streamed.end, delegate: self) else { return }
        // A body read whole leaves nothing to hold back: an HTTP/2 stream credits what it received
        // (an HTTP/1.1 connection's machine lifted its pause at the body's end).
        if streamed.end || connection.isWritable { client.setReading(true) }
    }

    /// A judged try's outcome: told once to its endpoint's outlier
    /// detection, and what the retry policy decided to the try's log line.
    private func tryEnded(_ end: CallMachine.TryEnd?) {
        guard let end else { return }
        downstream.record.log.tries = end.tries
        if end.tellsEndpoint, let endpoint = call?.endpoint { endpoint.upstream.tryEnded(endpoint, failure: end.failure) }
        if let decided = end.decided, let result = end.result {
            downstream.record.logTry(result, decided, decidedBy: end.decidedBy, byCondition: end.byCondition, tries: end.tries, listener: listener)
        }
    }

    // MARK: The answer

    /// The answer goes to the client (see `ClientExchange.prepare`), or the
    /// answer a filter made instead, the upstream's dropped with its connection.
    private func forward(_ upstreamHead: consuming ResponseHead, held: [UInt8] = [], whole: Bool = false) {
        guard let call else { return }
        // Moved, not copied: a second reference would make its first edit copy every field.
        var head = consume upstreamHead
        var body = held
        if let answer = downstream.prepare(&head, body: &body, whole: whole, for: call) {
            call.dropConnection()
            return end(.answer(answer))
        }
        if cacheAnswer(&head, body: body, call: call) { return }
        run(machine.responseHeadForwarded())
        call.perTryTimer?.cancel()
        downstream.writeHead(consume head, body: body)
    }
}
