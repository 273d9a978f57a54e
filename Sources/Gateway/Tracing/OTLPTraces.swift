import NIOCore
import W3CTraceContext

/// An OTLP `ExportTraceServiceRequest` (opentelemetry-proto 1.x,
/// `collector/trace/v1`): each span is written as it ends, on its call's
/// event loop, as a `ScopeSpans.spans` entry with the HTTP semantic
/// conventions' attributes; a batch frames entries written so.
enum OTLPTraces {
    /// One span as a `ScopeSpans.spans` entry. `wallOffset`: wall-clock
    /// minus monotonic nanoseconds, to date it.
    static func write(_ span: Span, wallOffset: Int64, into buffer: inout ByteBuffer) {
        buffer.writeProtobuf(bound: bound(span)) { out in out.message(2) { $0.span(span, wallOffset: wallOffset) } }
    }

    /// What a span can take at most: each of its strings is written at most
    /// twice (in the name and an attribute, or an attribute and the
    /// status), and the rest (ids, times, keys, tags, lengths) is under 1 KiB.
    private static func bound(_ span: Span) -> Int {
        func size(_ text: String?) -> Int { text?.utf8.count ?? 0 }
        let strings = span.method.utf8.count + size(span.target) + size(span.path) + size(span.host) + size(span.peer) + size(span.outcome)
            + size(span.protocolVersion)
        return 1024 + 2 * strings + span.endpointAttributes.count
    }

    /// The bytes of the request carrying `entries` (written by `write`)
    /// that come before them: gRPC's message prefix (when `grpc`), the
    /// gateway's resource and scope, and the lengths around them. The
    /// entries follow as they are, never copied into one array.
    static func requestHead(for entries: [ByteBuffer], serviceName: String, grpc: Bool) -> ByteBuffer {
        let fixed = 256 + 2 * (serviceName.utf8.count + GatewayVersion.current.utf8.count)
        var resource = ByteBuffer(), scope = ByteBuffer()
        resource.writeProtobuf(bound: fixed) { resource in
            // Resource.attributes
            resource.attribute(.serviceName, serviceName, field: 1)
            resource.attribute(.serviceVersion, GatewayVersion.current, field: 1)
        }
        scope.writeProtobuf(bound: fixed) { scope in
            // ScopeSpans.scope
            scope.message(1) { scope in
                scope.string(1, "gatewayd")
                scope.string(2, GatewayVersion.current)
            }
        }
        let scopeSpans = scope.readableBytes + entries.reduce(0) { $0 + $1.readableBytes }
        // ResourceSpans: resource (1), scope_spans (2).
        let resourceSpans = 1 + ProtobufWriter.varintSize(resource.readableBytes) + resource.readableBytes + 1
            + ProtobufWriter.varintSize(scopeSpans) + scopeSpans
        let length = 1 + ProtobufWriter.varintSize(resourceSpans) + resourceSpans
        var head = ByteBuffer()
        head.writeProtobuf(bound: 5 + 3 * 10 + resource.readableBytes + scope.readableBytes) { out in
            if grpc {
                // gRPC's message framing: not compressed, then the length.
                out.appendByte(0)
                withUnsafeBytes(of: UInt32(length).bigEndian) { out.append($0) }
            }
            // ExportTraceServiceRequest.resource_spans
            out.lengthDelimited(1, length: resourceSpans)
            out.lengthDelimited(1, length: resource.readableBytes)
            out.append(resource)
            out.lengthDelimited(2, length: scopeSpans)
            out.append(scope)
        }
        return head
    }

    /// A client span's attributes that are the same for every try on one
    /// endpoint (upstream, address, port), written once when the config
    /// loads: a try's span copies them instead of writing three attributes.
    static func endpointAttributes(upstream: String, host: String, port: Int) -> [UInt8] {
        [UInt8](protobufBound: 128 + 2 * (upstream.utf8.count + host.utf8.count)) { out in
            out.attribute(.upstream, upstream)
            out.attribute(.serverAddress, host)
            out.attribute(.serverPort, port)
        }
    }

    /// Where the entry starting at `start` of `entries` ends.
    static func entryEnd(_ entries: ByteBuffer, from start: Int) -> Int {
        // The tag (one byte: field 2, length-delimited), then the length.
        var at = start + 1, length = 0, shift = 0
        while true {
            let byte = entries.getInteger(at: at, as: UInt8.self) ?? 0
            at += 1
            length |= Int(byte & 0x7F) << shift
            if byte < 0x80 { return at + length }
            shift += 7
        }
    }
}

extension ProtobufWriter {
    fileprivate mutating func span(_ span: Span, wallOffset: Int64) {
        withUnsafeBytes(of: span.traceID.bytes) { bytes(1, $0) }
        withUnsafeBytes(of: span.spanID.bytes) { bytes(2, $0) }
        if let parent = span.parentID { withUnsafeBytes(of: parent.bytes) { bytes(4, $0) } }
        // The name: method and route, method and upstream, or what the client span was for.
        switch (span.kind, span.purpose) {
        case (.server, _): if let route = span.target { string(5, span.method, route) } else { string(5, span.method) }
        case (.client, .call): string(5, span.method, span.target ?? "")
        case (.client, .refresh): string(5, "credential refresh", span.target ?? "")
        case (.client, .healthCheck): string(5, "health check", span.target ?? "")
        }
        integer(6, span.kind.rawValue)
        fixed64(7, UInt64(Int64(span.start) + wallOffset))
        fixed64(8, UInt64(Int64(span.end) + wallOffset))
        attribute(.method, span.method)
        switch span.kind {
        case .server:
            if let target = span.path { attribute(.path, pathOf: target) }
            if let version = span.protocolVersion { attribute(.protocolVersion, version) }
            if let peer = span.peer { attribute(.clientAddress, peer) }
            if let route = span.target { attribute(.route, route) }
            if let outcome = span.outcome { attribute(.outcome, outcome) }
            attribute(.tries, span.tries)
        case .client:
            if span.endpointAttributes.isEmpty {
                if let upstream = span.target { attribute(.upstream, upstream) }
                if let host = span.host {
                    attribute(.serverAddress, host)
                    attribute(.serverPort, span.port)
                }
            } else {
                append(span.endpointAttributes)
            }
            if let peer = span.peer { attribute(.peerAddress, peer) }
            if span.tries > 0 { attribute(.resendCount, span.tries) }
            if span.purpose != .call { attribute(.purpose, span.purpose.rawValue) }
            if let reason = span.outcome { attribute(.errorType, reason) }
        }
        if span.status > 0 { attribute(.statusCode, span.status) }
        if span.isError {
            // Span.status: code ERROR, and what failed.
            message(15) { status in
                status.string(2, span.outcome ?? String(span.status))
                status.integer(3, 2)
            }
        }
        // Span.flags: W3C's sampled flag (only sampled calls make spans), and whether the parent is remote (a server span's is).
        let remote: UInt32 = span.parentID == nil ? 0 : span.kind == .server ? 0x300 : 0x100
        fixed32(16, 1 | remote)
    }

    /// A KeyValue (a span's attribute, field 9, or a resource's, field 1)
    /// whose value is a string, written in one pass: its key's bytes come
    /// ready-made, and every length is known before it is written.
    fileprivate mutating func attribute(_ key: AttributeKey, _ value: String, field: Int = 9) {
        stringAttributeHead(key, count: value.utf8.count, field: field)
        append(value)
    }

    fileprivate mutating func attribute(_ key: AttributeKey, pathOf target: String) {
        let path = target.utf8.firstIndex(of: UInt8(ascii: "?")).map { target[..<$0] } ?? target[...]
        stringAttributeHead(key, count: path.utf8.count, field: 9)
        append(path)
    }

    /// A string attribute up to its value's bytes, which follow.
    private mutating func stringAttributeHead(_ key: AttributeKey, count: Int, field: Int) {
        // AnyValue.string_value (1), in KeyValue.value (2).
        let anyValue = 1 + Self.varintSize(count) + count
        keyValueHead(key, field: field, anyValue: anyValue)
        appendByte(0x0A)
        varint(UInt64(count))
    }

    fileprivate mutating func attribute(_ key: AttributeKey, _ value: Int) {
        // AnyValue.int_value (3), in KeyValue.value (2).
        let number = UInt64(bitPattern: Int64(value))
        keyValueHead(key, field: 9, anyValue: 1 + Self.varintSize(number))
        appendByte(0x18)
        varint(number)
    }

    /// The KeyValue's tag and length, its key, and its value's tag and
    /// length, in room taken once (a key is under 128 bytes: one length byte).
    private mutating func keyValueHead(_ key: AttributeKey, field: Int, anyValue: Int) {
        let name = key.name.utf8CodeUnitCount
        let keyValue = 2 + name + 1 + Self.varintSize(anyValue) + anyValue
        let tag = field << 3 | 2
        var at = room(Self.varintSize(tag) + Self.varintSize(keyValue) + keyValue - anyValue)
        at = putVarint(tag, at: at)
        at = putVarint(keyValue, at: at)
        // KeyValue.key (1), then KeyValue.value (2).
        at = putVarint(0x0A, at: at)
        at = putVarint(name, at: at)
        put(key.name.utf8Start, count: name, at: at)
        at = putVarint(0x12, at: at + name)
        _ = putVarint(anyValue, at: at)
    }
}

/// An attribute's key: a constant, so writing it retains nothing (each is
/// under 128 bytes: its length takes one byte).
struct AttributeKey {
    let name: StaticString
    init(_ name: StaticString) { self.name = name }

    static let serviceName = AttributeKey("service.name")
    static let serviceVersion = AttributeKey("service.version")
    static let method = AttributeKey("http.request.method")
    static let path = AttributeKey("url.path")
    static let protocolVersion = AttributeKey("network.protocol.version")
    static let clientAddress = AttributeKey("client.address")
    static let route = AttributeKey("gatewayd.route")
    static let outcome = AttributeKey("gatewayd.outcome")
    static let tries = AttributeKey("gatewayd.tries")
    static let upstream = AttributeKey("gatewayd.upstream")
    static let serverAddress = AttributeKey("server.address")
    static let serverPort = AttributeKey("server.port")
    static let peerAddress = AttributeKey("network.peer.address")
    static let resendCount = AttributeKey("http.request.resend_count")
    static let purpose = AttributeKey("gatewayd.purpose")
    static let errorType = AttributeKey("error.type")
    static let statusCode = AttributeKey("http.response.status_code")
}
