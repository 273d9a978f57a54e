// libFuzzer entry: spans whose text fields and numbers come from the input
// are encoded as an OTLP export request; a protobuf reader written here,
// not the writer's, walks it: every length must nest exactly inside its
// message, and each span's strings must read back as they went in.
import NIOCore
import Rewriter
import W3CTraceContext
@testable import Gateway

/// One field: its number, wire type, and for length-delimited ones the bytes.
struct Field {
    var number: Int
    var wireType: Int
    var bytes: ArraySlice<UInt8> = []
}

func varint(_ input: ArraySlice<UInt8>, _ at: inout Int) -> UInt64 {
    var value: UInt64 = 0, shift: UInt64 = 0
    while true {
        precondition(at < input.endIndex && shift < 64, "varint runs past its message")
        let byte = input[at]
        at += 1
        value |= UInt64(byte & 0x7F) << shift
        if byte < 0x80 { return value }
        shift += 7
    }
}

/// The fields of one message, which must end exactly at its end.
func fields(_ message: ArraySlice<UInt8>) -> [Field] {
    var at = message.startIndex, out: [Field] = []
    while at < message.endIndex {
        let tag = varint(message, &at)
        var field = Field(number: Int(tag >> 3), wireType: Int(tag & 7))
        switch field.wireType {
        case 0: _ = varint(message, &at)
        case 1: at += 8
        case 5: at += 4
        case 2:
            let length = Int(varint(message, &at))
            precondition(length <= message.endIndex - at, "a length past its message")
            field.bytes = message[at..<(at + length)]
            at += length
        default: preconditionFailure("wire type \(field.wireType)")
        }
        precondition(at <= message.endIndex, "a field past its message")
        out.append(field)
    }
    return out
}

func only(_ fields: [Field], _ number: Int) -> [Field] { fields.filter { $0.number == number } }

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let input = Array(UnsafeRawBufferPointer(start: start, count: count))
    let texts = input.split(separator: 0xFF, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
    let text = { (i: Int) in texts.isEmpty ? "" : texts[i % texts.count] }
    var random = SplitMix64(seed: UInt64(count))
    var spans: [Span] = []
    for i in 0..<max(1, texts.count / 3) {
        let purposes: [Span.Purpose] = [.call, .refresh, .healthCheck]
        var span = Span(traceID: TraceID.random(using: &random), spanID: SpanID.random(using: &random), kind: i % 3 == 0 ? Span.Kind.server : .client,
                        purpose: purposes[i % 3], start: UInt64(i), method: text(i))
        if i % 2 == 1 { span.parentID = SpanID.random(using: &random) }
        span.end = UInt64(i + count)
        (span.target, span.path, span.peer, span.protocolVersion) = (text(i + 1), text(i + 2), text(i + 4), text(i + 6))
        if i % 2 == 0 { span.host = text(i + 3) }
        span.port = count
        // Some tries' endpoints come as the attributes written once per endpoint.
        if i % 4 == 2, span.kind == .client {
            span.endpointAttributes = OTLPTraces.endpointAttributes(upstream: text(i + 1), host: text(i + 3), port: count)
            span.host = nil
        }
        span.status = Int(input.first ?? 0) * 3
        if i % 4 != 0 { span.outcome = text(i + 5) }
        span.tries = i
        spans.append(span)
    }
    // The traceparent written by hand is the library's, byte for byte.
    for span in spans {
        let flags: TraceFlags = span.tries % 2 == 0 ? .sampled : []
        precondition(CallTrace.traceparent(span.traceID, span.spanID, flags)
            == TraceContext(traceID: span.traceID, spanID: span.spanID, flags: flags, state: TraceState()).traceParentHeaderValue, "traceparent")
        precondition(CallTrace.hex(span.traceID.bytes) == "\(span.traceID)", "trace id")
    }
    // Written one by one as the calls' loops write them, found again one by
    // one as the exporter cuts batches, and framed in two parts.
    var entries = ByteBuffer()
    for span in spans { OTLPTraces.write(span, wallOffset: Int64(count), into: &entries) }
    var ends: [Int] = [], at = 0
    while at < entries.writerIndex {
        at = OTLPTraces.entryEnd(entries, from: at)
        ends.append(at)
    }
    precondition(ends.count == spans.count && at == entries.writerIndex, "entries do not end where written")
    let cut = ends[ends.count / 2]
    // Framed as HTTP/protobuf sends it, or as gRPC does (a 5-byte message prefix first).
    let grpc = count % 2 == 1
    let parts = [entries.getSlice(at: 0, length: cut)!, entries.getSlice(at: cut, length: at - cut)!]
    var body = OTLPTraces.requestHead(for: parts, serviceName: text(7), grpc: grpc)
    for var part in parts { body.writeBuffer(&part) }
    let encoded = Array(body.readableBytesView)
    if grpc {
        precondition(encoded[0] == 0 && encoded[1..<5].reduce(0) { $0 << 8 | Int($1) } == encoded.count - 5, "gRPC prefix")
    }
    let request = fields(encoded[(grpc ? 5 : 0)...])
    precondition(request.count == 1 && request[0].number == 1)
    let resourceSpans = fields(request[0].bytes)
    let scopeSpans = fields(only(resourceSpans, 2)[0].bytes)
    let decoded = only(scopeSpans, 2).map { fields($0.bytes) }
    precondition(decoded.count == spans.count, "spans lost")
    for (i, (span, spanFields)) in zip(spans, decoded).enumerated() {
        let name = switch (span.kind, span.purpose) {
        case (.server, _): "\(span.method) \(span.target ?? "")"
        case (.client, .call): "\(span.method) \(span.target ?? "")"
        case (.client, .refresh): "credential refresh \(span.target ?? "")"
        case (.client, .healthCheck): "health check \(span.target ?? "")"
        }
        precondition(Array(only(spanFields, 5)[0].bytes) == Array(name.utf8), "name changed")
        var attributes: [String: [UInt8]] = [:]
        for keyValue in only(spanFields, 9).map({ fields($0.bytes) }) {
            let key = String(decoding: only(keyValue, 1)[0].bytes, as: UTF8.self)
            let value = fields(only(keyValue, 2)[0].bytes)
            if let string = value.first(where: { $0.number == 1 }) { attributes[key] = Array(string.bytes) }
        }
        precondition(attributes["http.request.method"] == Array(span.method.utf8), "method changed")
        if span.kind == .server {
            precondition(attributes["url.path"] == span.path.map { Array($0.utf8.prefix { $0 != UInt8(ascii: "?") }) }, "path changed")
            precondition(attributes["gatewayd.route"] == span.target.map { Array($0.utf8) }, "route changed")
            precondition(attributes["client.address"] == span.peer.map { Array($0.utf8) }, "client changed")
        } else {
            precondition(attributes["network.peer.address"] == span.peer.map { Array($0.utf8) }, "peer changed")
            precondition(attributes["error.type"] == span.outcome.map { Array($0.utf8) }, "error changed")
            precondition(attributes["gatewayd.upstream"] == span.target.map { Array($0.utf8) }, "upstream changed")
            let host = span.endpointAttributes.isEmpty ? span.host : text(i + 3)
            precondition(attributes["server.address"] == host.map { Array($0.utf8) }, "endpoint changed")
        }
    }
    return 0
}
