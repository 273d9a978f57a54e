import NIOCore
import NIOHTTP1
import Rewriter

/// What one exchange leaves behind, filled in as it goes: its access line,
/// its spans (when it is sampled and spans are exported) and the metrics
/// of the route it matched; written once, when it ends.
struct CallRecord {
    var log = AccessLog.Entry()
    var spans: CallSpans?
    /// Nil until a route matched: counted as unrouted.
    var routeMetrics: RouteMetrics?

    /// A request head arrived from `client` over `proto` at `start`.
    mutating func start(_ head: RequestHead, at start: NIODeadline, client: String, proto: String, readsUserAgent: Bool) {
        self.start(AccessLog.Entry(start: start, client: client, proto: proto, method: head.method.rawValue, target: head.uri,
                                   userAgent: readsUserAgent ? head.headers["User-Agent"] : nil))
    }

    /// A new exchange, logged as `log`: reset in place (a new record
    /// assigned whole is copied, spans and all).
    mutating func start(_ log: AccessLog.Entry) {
        self.log = log
        spans = nil
        routeMetrics = nil
    }

    /// The call is the route's from here on: logged and counted under it.
    mutating func onRoute(_ route: Route) {
        log.route = route.config.name
        log.upstream = route.upstream.name
        routeMetrics = route.metrics
    }

    /// A try starts on `endpoint`: the `traceparent` that names its span
    /// (nil: the call is not sampled); the try before it, if still open, ends.
    mutating func tryStarted(method: String, endpoint: Endpoint, now: NIODeadline, random: inout SplitMix64,
                             loopContext: inout LoopContext) -> String? {
        guard let spans else { return nil }
        return spans.tryStarted(method: method, endpoint: endpoint, now: now, random: &random, sink: loopContext.spanSink)
    }

    /// The call's `tries`th try went out on a connection to `peer`.
    mutating func trySent(tries: Int, to peer: String, now: NIODeadline) {
        log.tries = tries
        log.sentAt = now
        log.upstreamAddress = peer
        log.upstreamStatus = nil
        log.firstByte = nil
        spans?.tryConnected(to: peer)
    }

    /// The try's response head came.
    mutating func tryAnswered(status: Int, now: NIODeadline) {
        log.upstreamStatus = status
        spans?.tryAnswered(status: status)
        if let sentAt = log.sentAt { log.firstByte = now - sentAt }
    }

    /// The try failed: why, in full, for the log (never for the client).
    mutating func tryFailed(_ error: UpstreamError, now: NIODeadline, loopContext: inout LoopContext) {
        log.reason = error.description
        spans?.tryFailed(error.name, now: now, sink: loopContext.spanSink)
    }

    /// The try's answer is set aside (a retry follows): it is not the call's.
    mutating func tryDropped(now: NIODeadline, loopContext: inout LoopContext) {
        log.upstreamStatus = nil
        spans?.tryEnded(now: now, sink: loopContext.spanSink)
    }

    /// The exchange ended: its metrics, its spans and its access line.
    mutating func finish(status: Int, outcome: String, now: NIODeadline, loopContext: inout LoopContext) {
        (routeMetrics ?? loopContext.listener.metrics.unrouted).callEnded(method: log.method, status: status, started: log.start, now: now)
        spans.take()?.finish(route: routeMetrics == nil ? nil : log.route, status: status, outcome: outcome, tries: log.tries, now: now,
                             sink: loopContext.spanSink)
        guard let accessLog = loopContext.listener.accessLog, let buffer = loopContext.logBuffer else { return }
        // The line takes the entry over: a copy would retain each of its strings.
        var entry = AccessLog.Entry(start: log.start)
        swap(&entry, &log)
        accessLog.record(entry, status: status, outcome: outcome, into: buffer, now: now)
    }

    /// A try's outcome and what the retry policy made of it: the try's log line and metrics.
    func logTry(_ outcome: TryLog.Result, _ action: RetryState<LoopInstant>.Action, decidedBy: String?, byCondition: Bool, tries: Int,
                listener: ListenerContext) {
        TryLog.record(outcome, action, decidedBy: decidedBy, byCondition: byCondition, try: tries, route: log.route, requestID: log.requestID,
                      metrics: routeMetrics ?? listener.metrics.unrouted, logger: listener.accessLog == nil ? nil : listener.tryLogger)
    }
}
