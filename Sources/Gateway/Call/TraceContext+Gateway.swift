import Rewriter
import W3CTraceContext

/// The gateway's hop in a W3C trace (parsing and formatting by
/// swift-w3c-trace-context).
enum CallTrace {
    /// Edits a call's `traceparent` / `tracestate` as `config` says; returns
    /// the trace id the call carries upstream (nil: none).
    /// - a valid traceparent (with `propagate`): the same trace and flags, a
    ///   new span id for this hop, tracestate kept;
    /// - a missing or invalid one: both fields dropped (W3C Trace Context §3.3:
    ///   an invalid traceparent is ignored, its tracestate with it), and with
    ///   `start` a new trace begins here (sampled).
    static func apply(_ headers: inout HeaderList, config: TracingConfig, random: inout SplitMix64) -> String? {
        guard config.isOn else { return nil }
        let parent = headers["traceparent"].flatMap { try? TraceContext(traceParentHeaderValue: $0, traceStateHeaderValue: headers["tracestate"]) }
        let hop: TraceContext
        if let parent, config.propagate {
            hop = TraceContext(traceID: parent.traceID, spanID: .random(using: &random), flags: parent.flags, state: parent.state)
        } else if parent == nil, config.start {
            hop = TraceContext(traceID: .random(using: &random), spanID: .random(using: &random), flags: .sampled, state: TraceState())
        } else {
            // A valid parent without `propagate` passes through untouched.
            if parent == nil {
                headers.remove("traceparent")
                headers.remove("tracestate")
            }
            return parent.map { "\($0.traceID)" }
        }
        headers.set("traceparent", hop.traceParentHeaderValue)
        if let state = hop.traceStateHeaderValue { headers.set("tracestate", state) } else { headers.remove("tracestate") }
        return "\(hop.traceID)"
    }
}
