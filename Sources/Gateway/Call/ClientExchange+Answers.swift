import NIOCore
import NIOHTTP1
import Rewriter

/// The client-side waits, the answers the gateway writes itself, and the
/// exchange's end.
extension ClientExchange {
    /// The connection's or stream's one timer wakes the runner then (or earlier).
    func wake(at instant: LoopInstant) { client.wake(at: instant.deadline) }

    /// The timer woke (the call's deadline is the runner's): the client-side wait.
    func timerFired() {
        switch exchange.timerFired(now: loopNow) {
        case nil:
            return
        case .notYet(let deadline):
            wake(at: deadline)
        case .noHead:
            // No request in flight: the client sent no (complete) head in time.
            client.close()
        case .bodyStalled:
            // A request body that stopped coming (nginx: client_body_timeout).
            guard client.isActive else { return client.close() }
            let idleTimeout = listener.config.limits.idleTimeout
            refuseBuffered { .bodyTimeout(idleTimeout, route: $0) }
        }
    }

    func respond(_ problem: Problem, to head: RequestHead, requestID: String? = nil, extraHeaders: HeaderList = [:],
                          close: Bool = false) {
        record.log.route = problem.route ?? record.log.route
        if let why = problem.logDetail { record.log.reason = why }
        // Every response the gateway makes carries a request id (the client's, or a new one), logged with it.
        let requestID = requestID ?? ClientInfo.requestID(from: head.headers, random: &random)
        record.log.requestID = requestID
        write(OwnAnswer(problem, requestID: requestID, traceID: record.log.traceHex, extraHeaders: extraHeaders, to: head,
                        close: close || exchange.quiescing))
    }

    func write(_ answer: OwnAnswer) {
        record.log.bytes = answer.body.count
        writeRecord(status: answer.status, outcome: answer.status < 400 ? "ok" : "gateway")
        client.write(.head(answer.head))
        if answer.writesBody { client.write(.body(client.allocator.buffer(bytes: answer.body))) }
        finishExchange(keepAlive: answer.keepAlive)
    }

    /// The built-in echo's answer to a call that went through the route's
    /// filters: the request as they left it (and the answer as they made it).
    func echo(_ call: Call) -> OwnAnswer {
        var answer = OwnAnswer(echoing: call.request, requestID: call.requestID, rules: call.route.config.responseHeaders,
                               to: call.requestHead, close: exchange.quiescing)
        var body: [UInt8]? = answer.body
        if let replaced = filterResponse(&answer.head, body: &body, call) { return replaced }
        answer.body = body ?? answer.body
        return answer
    }

    /// The answer through the route's filters (see `FilterRun.response`):
    /// the answer that replaces it, when a filter made one, logged with why
    /// (as is a failure `fail_open` let through).
    func filterResponse(_ head: inout ResponseHead, body: inout [UInt8]?, _ call: Call) -> OwnAnswer? {
        guard let filters = call.filters else { return nil }
        let replaced = filters.response(&head, body: &body, for: call, traceID: record.log.traceHex)
        if let reason = replaced?.reason ?? filters.failureReason { record.log.reason = reason }
        return replaced?.0
    }

    /// The upstream's answer made the client's, edited in place (handed
    /// over, not shared, it is not copied): the route's response rules, then
    /// its filters, which see the body when it is `whole` (one too large to
    /// hold streams past them). Returns the answer a filter made instead.
    func prepare(_ head: inout ResponseHead, body: inout [UInt8], whole: Bool, for call: Call) -> OwnAnswer? {
        head.prepareForClient(requestID: call.requestID, rules: call.route.config.responseHeaders, close: !call.keepAlive || exchange.quiescing)
        guard call.filters != nil else { return nil }
        var seen: [UInt8]? = whole ? body : nil
        if let answer = filterResponse(&head, body: &seen, call) { return answer }
        if let seen { body = seen }
        return nil
    }

    /// An upstream answer's head, and what was held of its body (the rest streams after it).
    func writeHead(_ head: consuming ResponseHead, body: [UInt8]) {
        client.write(.head(consume head))
        guard !body.isEmpty else { return }
        record.log.bytes += body.count
        client.write(.body(client.allocator.buffer(bytes: body)))
    }

    /// The built-in echo's answer: one try of the route's upstream.
    func answerEcho(_ answer: OwnAnswer, route: Route) {
        route.metrics.tries?.increment()
        record.log.tries = 1
        record.log.upstreamStatus = 200
        write(answer)
    }

    /// How a call ends, as its client sees it.
    enum Ending {
        /// The gateway's own answer.
        case problem(Problem, headers: HeaderList = [:], close: Bool = false)
        /// An answer made here (a filter's).
        case answer(OwnAnswer)
        /// The client's connection (HTTP/1.1) or stream (HTTP/2) cut: a
        /// response that has begun is never made to look whole.
        case cut(outcome: String)
        /// The upstream's answer went through whole.
        case complete

        var isComplete: Bool {
            if case .complete = self { return true }
            return false
        }
    }

    /// The call ended (`call`: nil when it had ended already): its client gets `ending`.
    func end(_ ending: Ending, call: Call?) {
        switch ending {
        case .problem(let problem, let headers, let close):
            guard let call else { return }
            respond(problem, to: call.requestHead, requestID: call.requestID, extraHeaders: headers, close: close)
        case .answer(let answer):
            write(answer)
        case .cut(let outcome):
            writeRecord(status: record.log.upstreamStatus ?? 0, outcome: outcome)
            client.close()
        case .complete:
            guard let call else { return }
            writeRecord(status: record.log.upstreamStatus ?? 0, outcome: "ok")
            finishExchange(keepAlive: call.keepAlive)
        }
    }

    /// The exchange is over: its access log line and metrics, once.
    func writeRecord(status: Int, outcome: String) {
        guard exchange.logOnce() else { return }
        record.finish(status: status, outcome: outcome, now: now, loopContext: &loopContext)
    }

    /// Ends the response; an HTTP/1.1 connection then reads its next request
    /// (within idle_timeout).
    func finishExchange(keepAlive: Bool) {
        let idleTimeout = client.carriesOneExchange ? nil : listener.config.limits.idleTimeout
        let (keepOpen, next) = exchange.responseEnded(keepAlive: keepAlive, now: loopNow, idleTimeout: idleTimeout)
        if let next { wake(at: next) }
        client.end(close: !keepOpen)
    }
}
