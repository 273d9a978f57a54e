import NIOCore
import Rewriter
import W3CTraceContext

/// The spans of one sampled call: the server span (the gateway's hop,
/// whose id is the hop's span id) and a client span per try, whose id goes
/// upstream in that try's `traceparent`. Each span goes to the loop's sink
/// as it ends. A class: the spans are written from where they are, not
/// copied out of the call's record with their strings.
final class CallSpans {
    /// Both spans are moved out when they end: a copy retains each of their strings.
    private var server: Span?
    private let context: TraceContext
    private var open: Span?
    private var tries = 0
    /// The first try's span id and `traceparent`, chosen with the hop.
    private let firstTry: (id: SpanID, traceparent: String)?

    /// `target`: the request's, whose path the span shows (its query is not
    /// taken apart here, on the call's loop, but when the span is sent).
    init(hop: CallTrace.Hop, method: String, target: String, client: String, protocolVersion: String, start: NIODeadline) {
        context = hop.context
        firstTry = hop.firstTry
        server = Span(traceID: hop.context.traceID, spanID: hop.context.spanID, parentID: hop.parent, kind: .server,
                      start: start.uptimeNanoseconds, method: method, path: target, peer: client, protocolVersion: protocolVersion)
    }

    /// A try starts on `endpoint`: the `traceparent` that names its span,
    /// for its request (the try before it, if it had not ended, ends now).
    func tryStarted(method: String, endpoint: Endpoint, now: NIODeadline, random: inout SplitMix64, sink: SpanSink?) -> String {
        tryEnded(now: now, sink: sink)
        let first = tries == 0 ? firstTry : nil
        let id = first?.id ?? SpanID.random(using: &random)
        open = Span(traceID: context.traceID, spanID: id, parentID: context.spanID, kind: .client, start: now.uptimeNanoseconds,
                    method: method, target: endpoint.upstream.name, endpointAttributes: endpoint.spanAttributes, tries: tries)
        tries += 1
        return first?.traceparent ?? CallTrace.traceparent(context.traceID, id, context.flags)
    }

    func tryConnected(to peer: String) { open?.peer = peer }

    func tryAnswered(status: Int) { open?.status = status }

    /// The try failed (`reason`: the failure's kind): its span ends.
    func tryFailed(_ reason: String, now: NIODeadline, sink: SpanSink?) {
        open?.outcome = reason
        tryEnded(now: now, sink: sink)
    }

    /// The try is over (its answer judged and set aside): its span ends.
    func tryEnded(now: NIODeadline, sink: SpanSink?) {
        guard var span = open.take() else { return }
        span.end = now.uptimeNanoseconds
        sink?.send(span)
    }

    /// The call ended after `tries` (the built-in echo's answer is one):
    /// the span of its last try, if still open, ends, then its own.
    func finish(route: String?, status: Int, outcome: String, tries: Int, now: NIODeadline, sink: SpanSink?) {
        tryEnded(now: now, sink: sink)
        guard var span = server.take() else { return }
        span.target = route
        span.status = status
        span.outcome = outcome
        span.tries = tries
        span.end = now.uptimeNanoseconds
        sink?.send(span)
    }

    /// A credential refresh made for this call: its span (started when the
    /// refresh is sent) and the `traceparent` that names it.
    func refresh(method: String, upstream: UpstreamConfig, random: inout SplitMix64) -> (Span, traceparent: String) {
        let id = SpanID.random(using: &random)
        let span = Span(traceID: context.traceID, spanID: id, parentID: context.spanID, kind: .client, purpose: .refresh, start: 0,
                        method: method, target: upstream.name, host: upstream.url?.host, port: upstream.url?.port ?? 0)
        return (span, CallTrace.traceparent(context.traceID, id, context.flags))
    }
}
