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
    }

    /// Edits a call's `traceparent` / `tracestate` as `config` says; returns
    /// the trace id the call carries upstream (nil: none) and the hop it is
    /// (nil: none of the gateway's, so no span of its own).
    /// - a valid traceparent (with `propagate`): the same trace and flags, a
    ///   new span id for this hop, tracestate kept;
    /// - a missing or invalid one: both fields dropped (W3C Trace Context §3.3:
    ///   an invalid traceparent is ignored, its tracestate with it), and with
    ///   `start` a new trace begins here, sampled at `export`'s ratio (always
    ///   without export).
    static func apply(_ headers: inout HeaderList, config: TracingConfig, random: inout SplitMix64) -> (traceID: String?, hop: Hop?) {
        guard config.isOn else { return (nil, nil) }
        let parent = headers["traceparent"].flatMap { try? TraceContext(traceParentHeaderValue: $0, traceStateHeaderValue: headers["tracestate"]) }
        let hop: Hop
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
            return (parent.map { hex($0.traceID.bytes) }, nil)
        }
        headers.set("traceparent", traceparent(hop.context.traceID, hop.context.spanID, hop.context.flags))
        if let state = hop.context.traceStateHeaderValue { headers.set("tracestate", state) } else { headers.remove("tracestate") }
        return (hex(hop.context.traceID.bytes), hop)
    }

    /// `00-<trace id>-<span id>-<flags>`. Written here, not by the library's
    /// `traceParentHeaderValue`: made once per try and once per traced call,
    /// the library's took 5% of a call's CPU (docs/benchmarks.md).
    static func traceparent(_ traceID: TraceID, _ spanID: SpanID, _ flags: TraceFlags) -> String {
        String(unsafeUninitializedCapacity: 55) { out in
            var at = 0
            func put(_ byte: UInt8) {
                out[at] = byte
                at += 1
            }
            func putHex(_ byte: UInt8) {
                put(hexDigits[Int(byte >> 4)])
                put(hexDigits[Int(byte & 0xF)])
            }
            put(UInt8(ascii: "0"))
            put(UInt8(ascii: "0"))
            put(UInt8(ascii: "-"))
            withUnsafeBytes(of: traceID.bytes) { for byte in $0 { putHex(byte) } }
            put(UInt8(ascii: "-"))
            withUnsafeBytes(of: spanID.bytes) { for byte in $0 { putHex(byte) } }
            put(UInt8(ascii: "-"))
            putHex(flags.rawValue)
            return at
        }
    }

    /// A trace id's 32 hex digits, as the access log and problems show it.
    static func hex(_ bytes: TraceID.Bytes) -> String {
        String(unsafeUninitializedCapacity: 32) { out in
            withUnsafeBytes(of: bytes) { id in
                for (i, byte) in id.enumerated() {
                    out[2 * i] = hexDigits[Int(byte >> 4)]
                    out[2 * i + 1] = hexDigits[Int(byte & 0xF)]
                }
            }
            return 32
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// OpenTelemetry's TraceIdRatioBased: the trace id's last 8 bytes, read
    /// as a number, below `ratio` of their range.
    static func sampledAt(_ ratio: Double, _ traceID: TraceID) -> Bool {
        guard ratio < 1 else { return true }
        let b = traceID.bytes
        let low = [b.8, b.9, b.10, b.11, b.12, b.13, b.14, b.15].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return Double(low) < ratio * 0x1p64
    }
}
