import NIOCore
import Testing
import W3CTraceContext
@testable import Gateway

/// The protobuf the span export writes, byte for byte where protobuf fixes
/// it; and `tracing.export`'s config errors.
@Suite(.ownThreads) struct SpanEncodingTests {
    func written(_ body: (inout ProtobufWriter) -> Void) -> [UInt8] {
        var buffer = ByteBuffer()
        buffer.writeProtobuf(bound: 512, body)
        return Array(buffer.readableBytesView)
    }

    @Test func varintsLengthsAndNestedMessagesAreProtobufs() {
        #expect(written { out in
            out.integer(1, 300)
            out.integer(2, -1)
            out.message(3) { $0.string(1, "a") }
            out.fixed64(4, 1)
            out.fixed32(5, 0x0301)
        } == [0x08, 0xAC, 0x02,
              0x10, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01,
              0x1A, 0x03, 0x0A, 0x01, 0x61,
              0x21, 1, 0, 0, 0, 0, 0, 0, 0,
              0x2D, 0x01, 0x03, 0, 0])
        // A nested message past 127 bytes takes a two-byte length, put before it.
        let long = written { $0.message(1) { $0.string(2, String(repeating: "x", count: 200)) } }
        #expect(Array(long.prefix(5)) == [0x0A, 0xCB, 0x01, 0x12, 0xC8] && long.count == 3 + 3 + 200)
        #expect(long.suffix(200).allSatisfy { $0 == UInt8(ascii: "x") })
    }

    @Test func sampledAtTheRatioOfTheTraceIDsLowHalf() {
        func id(low: UInt8) -> TraceID { TraceID(bytes: (1, 1, 1, 1, 1, 1, 1, 1, low, 0, 0, 0, 0, 0, 0, 0)) }
        #expect(CallTrace.sampledAt(0.5, id(low: 0x7F)) && !CallTrace.sampledAt(0.5, id(low: 0x80)))
        #expect(CallTrace.sampledAt(1, id(low: 0xFF)) && !CallTrace.sampledAt(0, id(low: 0)))
    }

    func issues(_ tracing: String) -> [String] {
        do {
            _ = try ConfigLoader.load(yaml: "listeners: [{address: 127.0.0.1:1}]\ntracing: \(tracing)\n", file: "t.yaml")
            return []
        } catch {
            return error.issues.map(\.description)
        }
    }

    @Test func exportConfigErrorsNameTheirKey() {
        #expect(issues(#"{start: true, export: {otlp: {endpoint: "http://c:4318", protocol: grpc, sample_ratio: 0.25, service_name: edge}}}"#).isEmpty)
        let noTrace = issues(#"{export: {otlp: {endpoint: "http://c:4318"}}}"#)
        #expect(noTrace.count == 1 && noTrace[0].contains("t.yaml:2") && noTrace[0].contains("tracing.export") && noTrace[0].contains("set propagate or start"),
                "\(noTrace)")
        let bad = issues(#"{start: true, export: {otlp: {endpoint: "udp://c", protocol: thrift, sample_ratio: 2, service_name: "", timeout: 0s, batch: 1}}}"#)
        #expect(bad.count == 6, "\(bad)")
        for (key, says) in [("endpoint", "expected http(s)://host"), ("protocol", "http/protobuf | grpc"), ("sample_ratio", "from 0 to 1"),
                            ("service_name", "must not be empty"), ("timeout", "more than 0"), ("batch", "unknown")] {
            #expect(bad.contains { $0.contains("tracing.export.otlp.\(key)") && $0.contains(says) }, "\(key): \(bad)")
        }
        let grpcPath = issues(#"{start: true, export: {otlp: {endpoint: "http://c:4317/v1/traces", protocol: grpc}}}"#)
        #expect(grpcPath.count == 1 && grpcPath[0].contains("a gRPC endpoint has no path"), "\(grpcPath)")
        #expect(issues(#"{start: true, export: {}}"#).first?.contains("tracing.export.otlp: missing") == true)
    }
}
