import Rewriter
import W3CTraceContext

/// The gateway's hop in a W3C trace (parsing and formatting by
/// swift-w3c-trace-context).
enum CallTrace {
    /// The trace a call carries, as the gateway's hop sees it.
    struct Hop {
        /// The hop's context: its span id is the server span's.
        var context: TraceContext
        /// The caller's span; nil when the trace starts here.
        var parent: SpanID?
        /// When the hop's spans are exported: the span id of its first
        /// try's client span, and the `traceparent` naming it, which goes
        /// upstream from the start (a try's span is the upstream's parent).
        var firstTry: (id: SpanID, traceparent: String)?
    }

    /// Edits a call's `traceparent` / `tracestate` as `config` says; returns
    /// the trace id the call carries upstream (nil: none) and the hop it is
    /// (nil: none of the gateway's, so no span of its own).
    /// - a valid traceparent (with `propagate`): the same trace and flags, a
    ///   new span id for this hop (for its first try's client span, when
    ///   spans are exported), tracestate kept;
    /// - a missing or invalid one: both fields dropped (W3C Trace Context §3.3:
    ///   an invalid traceparent is ignored, its tracestate with it), and with
    ///   `start` a new trace begins here, sampled at `export`'s ratio (always
    ///   without export).
    static func apply(_ headers: inout HeaderList, config: TracingConfig, random: inout SplitMix64) -> (traceID: TraceID?, hop: Hop?) {
        guard config.isOn else { return (nil, nil) }
        let parent = headers["traceparent"].flatMap { try? TraceContext(traceParentHeaderValue: $0, traceStateHeaderValue: headers["tracestate"]) }
        var hop: Hop
        if let parent, config.propagate {
            hop = Hop(context: TraceContext(traceID: parent.traceID, spanID: .random(using: &random), flags: parent.flags, state: parent.state),
                      parent: parent.spanID)
        } else if parent == nil, config.start {
            let traceID = TraceID.random(using: &random)
            let sampled = config.export.map { sampledAt($0.sampleRatio, traceID) } ?? true
            hop = Hop(context: TraceContext(traceID: traceID, spanID: .random(using: &random), flags: sampled ? .sampled : [], state: TraceState()),
                      parent: nil)
        } else {
            // A valid parent without `propagate` passes through untouched.
            if parent == nil {
                headers.remove("traceparent")
                headers.remove("tracestate")
            }
            return (parent?.traceID, nil)
        }
        if config.export != nil, hop.context.flags.contains(.sampled) {
            let id = SpanID.random(using: &random)
            hop.firstTry = (id, traceparent(hop.context.traceID, id, hop.context.flags))
        }
        headers.set("traceparent", hop.firstTry?.traceparent ?? traceparent(hop.context.traceID, hop.context.spanID, hop.context.flags))
        if let state = hop.context.traceStateHeaderValue { headers.set("tracestate", state) } else { headers.remove("tracestate") }
        return (hop.context.traceID, hop)
    }

    /// `00-<trace id>-<span id>-<flags>`. Written here, not by the library's
    /// `traceParentHeaderValue`: made once per try and once per traced call,
    /// the library's took 5% of a call's CPU (docs/benchmarks.md).
    static func traceparent(_ traceID: TraceID, _ spanID: SpanID, _ flags: TraceFlags) -> String {
        String(unsafeUninitializedCapacity: 55) { out in
            out[0] = UInt8(ascii: "0")
            out[1] = UInt8(ascii: "0")
            out[2] = UInt8(ascii: "-")
            withUnsafeBytes(of: traceID.bytes) { writeHex($0, into: out, at: 3) }
            out[35] = UInt8(ascii: "-")
            withUnsafeBytes(of: spanID.bytes) { writeHex($0, into: out, at: 36) }
            out[52] = UInt8(ascii: "-")
            withUnsafeBytes(of: flags.rawValue) { writeHex($0, into: out, at: 53) }
            return 55
        }
    }

    /// A trace id's 32 hex digits, as the access log and problems show it.
    static func hex(_ bytes: TraceID.Bytes) -> String {
        String(unsafeUninitializedCapacity: 32) { out in
            withUnsafeBytes(of: bytes) { writeHex($0, into: out, at: 0) }
            return 32
        }
    }

    /// Two lowercase hex digits a byte, from `at` on (room checked).
    private static func writeHex(_ bytes: UnsafeRawBufferPointer, into out: UnsafeMutableBufferPointer<UInt8>, at start: Int) {
        precondition(start + 2 * bytes.count <= out.count)
        for (i, byte) in bytes.enumerated() {
            out[start + 2 * i] = hexDigit(byte >> 4)
            out[start + 2 * i + 1] = hexDigit(byte & 0xF)
        }
    }

    @inline(__always)
    private static func hexDigit(_ nibble: UInt8) -> UInt8 { nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") - 10 + nibble }

    /// OpenTelemetry's TraceIdRatioBased: the trace id's last 8 bytes, read
    /// as a number, below `ratio` of their range.
    static func sampledAt(_ ratio: Double, _ traceID: TraceID) -> Bool {
        guard ratio < 1 else { return true }
        let b = traceID.bytes
        let low = [b.8, b.9, b.10, b.11, b.12, b.13, b.14, b.15].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return Double(low) < ratio * 0x1p64
    }
}
