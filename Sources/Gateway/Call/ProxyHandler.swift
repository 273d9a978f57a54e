import NIOCore
import NIOHTTP1
import Rewriter

/// The runner of one downstream call at a time — on an HTTP/1.1 connection
/// (fed by its HTTP1ConnectionHandler, which holds pipelined requests back
/// until the answer before them ends) or one HTTP/2 stream (fed by the
/// connection's HTTP2ServerHandler). Its client side (`ClientExchange`)
/// reads and admits each request; it performs what the call's state
/// machine decides: filters and modifiers, a pooled upstream connection of
/// this event loop per try, the answer streamed back part by part, timers,
/// retries, credential refresh, tunnels.
final class ProxyHandler: UpstreamResponseDelegate {
    typealias CallMachine = CallStateMachine<LoopInstant>

    let front: ClientExchange
    /// Where answers go (the front's, kept here too: read through the front, each use is retained).
    let client: any ClientSide
    /// The call in flight: what it carries. Its lifecycle is `machine`'s.
    var call: Call?
    var machine = CallMachine()

    init(slot: ListenerSlot, client: any ClientSide) {
        let seed = Self.processSeed ^ NIODeadline.now().uptimeNanoseconds ^ UInt64(UInt(bitPattern: ObjectIdentifier(client).hashValue))
        front = ClientExchange(slot: slot, client: client, seed: seed)
        self.client = client
    }

    static let processSeed = UInt64.random(in: .min ... .max)
    static let defaultTimeout = Duration.seconds(60)

    var shared: ListenerContext { front.shared }
    var now: NIODeadline { front.now }
    var loopNow: LoopInstant { front.loopNow }

    // MARK: Events from the client's connection or stream

    /// A request head, taken over (see `HTTP1ConnectionHandler.parse`).
    func requestHead(_ head: consuming RequestHead) {
        let event = front.eventStarted()
        defer { front.eventEnded(event) }
        if let start = front.headArrived(head) { startCall(start) }
    }

    func requestBody(_ buffer: ByteBuffer) {
        front.atEvent {
            if machine.streamed != nil { run(machine.bodyPart(buffer)) } else { front.bodyArrived(buffer) }
        }
    }

    func requestEnded() {
        front.atEvent {
            if let start = front.requestEnded() { startCall(start) }
            run(machine.bodyEnded())
        }
    }

    /// A malformed request (bad framing, smuggling attempt): the call is
    /// abandoned and the connection closes (cut, when the response has begun).
    func malformed(_ problem: Problem) {
        if machine.responseForwarded { return client.close() }
        abandonCall()
        front.malformed(problem)
    }

    /// The connection or stream is gone: the call in flight is abandoned.
    func detach() {
        abandonCall()
        front.detach()
    }

    /// The timer woke: the call's deadline first, then the client-side wait.
    func deadlinePassed() {
        run(machine.deadlinePassed(now: loopNow))
        front.timerFired()
    }

    func clientBecameWritable() { call?.connection?.setReading(true) }

    // MARK: The call

    /// Starts the call's first try (through the filters and modifiers, when there are any).
    func startCall(_ start: ClientExchange.Start) {
        let call = start.call
        self.call = call
        front.exchange.callStarted()
        let action = machine.start(now: loopNow, timeout: call.route.config.timeout ?? Self.defaultTimeout,
                                   runsModifiers: !shared.modifiers.isEmpty || !call.route.filters.isEmpty || call.limit != nil,
                                   perTryTimeout: call.route.config.retry?.perTryTimeout, retry: start.retry, streams: call.streams)
        if let deadline = machine.deadline { front.wake(at: deadline) }
        run(action)
    }

    /// Performs what the call's state machine decided.
    func run(_ action: CallMachine.Action) {
        switch action {
        case .ignore:
            return
        case .wake(let deadline):
            front.wake(at: deadline)
        case .timeOutCall(let forwarded):
            guard client.isActive, let call else { return }
            call.dropConnection()
            end(forwarded ? .cut(outcome: "cut-short-deadline") : .problem(.deadline(on: call.route)))
        case .runModifiers(let token):
            if let call, let outcome = RequestHooks.run(call, for: self, token: token) { hooksFinished(outcome, token) }
        case .acquireConnection(let token):
            acquire(token)
        case .timeOutTry:
            call?.dropConnection()
            upstreamFailed(.timeout("no response within per_try_timeout"), progress: .sent)
        case .wait(let token, let delay):
            call?.backoff = schedule(in: delay) { $0.backoffElapsed(token) }
        case .sendBody(let buffer):
            guard let connection = call?.connection else { return }
            connection.sendBody(buffer)
            // Paused whenever the upstream cannot take more.
            if !connection.isWritable { client.setReading(false) }
        case .sendEnd:
            call?.connection?.sendEnd()
        case .resumeClient:
            client.setReading(true)
        case .judgeHeld(let head, let body):
            if judged(status: Int(head.status.code), headers: head.headers, body: body) { return }
            forward(head, held: body, whole: true)
            end(.complete)
        case .finish:
            end(.complete)
        }
    }

    /// One of the call's timers: `event` is the machine's step when it fires.
    func schedule(in delay: Duration, _ event: @escaping (inout CallMachine) -> CallMachine.Action) -> Scheduled<Void> {
        client.eventLoop.assumeIsolated().scheduleTask(in: delay.timeAmount) { [self] in run(event(&machine)) }
    }

    /// What the hooks made of the request, now or later (`token`: the step that ran them).
    func hooksFinished(_ outcome: RequestHooks.Outcome, _ token: CallMachine.Token) {
        // The call ended meanwhile (client gone, deadline): nothing to answer.
        guard machine.isCurrent(token), let call else { return }
        // A filter let through by `fail_open` says so on the access line.
        if let reason = call.filters?.failureReason { front.record.log.reason = reason }
        guard case .end(let ending, let reason) = outcome else { return run(machine.modifiersFinished(token)) }
        if let reason { front.record.log.reason = reason }
        end(ending)
    }

    /// The call is over: its client gets `ending`.
    func end(_ ending: ClientExchange.Ending) {
        let call = endCall()
        // The client may still be sending its body: it is read (and dropped) so the connection's framing stays intact.
        run(machine.bodyAbandoned())
        front.end(ending, call: call)
    }

    /// The call is over: every token it handed out is stale. Returns it for its last words.
    @discardableResult
    func endCall() -> Call? {
        guard let call = call.take() else { return nil }
        machine.end()
        call.end(pool: front.context.pool)
        return call
    }

    /// The client is gone (or broke its framing): the upstream connection of
    /// a call in flight is in an unknown state, so it is closed; no more of its body comes.
    func abandonCall() {
        endCall()?.dropConnection()
        machine.bodyGone()
    }
}
