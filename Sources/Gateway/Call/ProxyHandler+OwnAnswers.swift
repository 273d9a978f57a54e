import NIOCore
import NIOHTTP1
import Rewriter

/// The connection's timer and the answers the gateway writes itself.
extension ProxyHandler {
    /// The connection's or stream's one timer wakes `deadlinePassed()` then (or earlier).
    func wake(at instant: LoopInstant) { client.wake(at: instant.deadline) }

    /// The timer woke: the call's deadline first, then the client-side wait.
    func deadlinePassed() {
        let now = loopNow
        run(machine.deadlinePassed(now: now))
        switch exchange.timerFired(now: now) {
        case nil:
            return
        case .notYet(let deadline):
            wake(at: deadline)
        case .noHead:
            // No request in flight: the client sent no (complete) head in time.
            client.close()
        case .bodyStalled:
            // A request body that stopped coming (nginx: client_body_timeout).
            guard let head, client.isActive else { return client.close() }
            self.head = nil
            let route = admitted?.match.route.config.name
            admitted = nil
            respond(.bodyTimeout(shared.config.limits.idleTimeout, route: route), to: head, close: true)
        }
    }

    /// The route's `timeout` passed with the call in flight.
    func callTimedOut(forwarded: Bool) {
        guard client.isActive, let call = endCall() else { return }
        call.connection?.abandon()
        endStreaming()
        if forwarded {
            writeRecord(status: record.log.upstreamStatus ?? 0, outcome: "cut-short-deadline")
            client.close()
        } else {
            respond(.deadline(upstream: call.route.upstream.name, route: call.route.config.name), to: call.requestHead, requestID: call.requestID)
        }
    }

    func respond(_ problem: Problem, to head: RequestHead, requestID: String? = nil, extraHeaders: HeaderList = [:],
                 close: Bool = false) {
        record.log.route = problem.route ?? record.log.route
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

    /// The exchange is over: its access log line and metrics, once.
    func writeRecord(status: Int, outcome: String) {
        guard exchange.logOnce() else { return }
        record.finish(status: status, outcome: outcome, now: now, context: &context)
    }
}
