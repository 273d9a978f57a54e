import W3CTraceContext

/// An OTLP `ExportTraceServiceRequest` (opentelemetry-proto 1.x,
/// `collector/trace/v1`) for a batch of spans, with the HTTP semantic
/// conventions' attributes written from each span's fields.
enum OTLPTraces {
    /// `wallOffset`: wall-clock minus monotonic nanoseconds, to date the spans.
    static func request(_ batch: [ArraySlice<Span>], serviceName: String, wallOffset: Int64) -> [UInt8] {
        var out = ProtobufWriter(capacity: 256 + batch.reduce(0) { $0 + $1.count } * 400)
        // ExportTraceServiceRequest.resource_spans
        out.message(1) { resourceSpans in
            // ResourceSpans.resource: Resource.attributes
            resourceSpans.message(1) { resource in
                resource.attribute(.serviceName, serviceName, field: 1)
                resource.attribute(.serviceVersion, GatewayVersion.current, field: 1)
            }
            // ResourceSpans.scope_spans
            resourceSpans.message(2) { scopeSpans in
                scopeSpans.message(1) { scope in
                    scope.string(1, "gatewayd")
                    scope.string(2, GatewayVersion.current)
                }
                for spans in batch {
                    for span in spans { scopeSpans.message(2) { $0.span(span, wallOffset: wallOffset) } }
                }
            }
        }
        return out.bytes
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
            if let upstream = span.target { attribute(.upstream, upstream) }
            if let host = span.host {
                attribute(.serverAddress, host)
                attribute(.serverPort, span.port)
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
        var value = value
        value.withUTF8 { attribute(key, $0, field: field) }
    }

    fileprivate mutating func attribute(_ key: AttributeKey, pathOf target: String) {
        var target = target
        target.withUTF8 { utf8 in attribute(key, UnsafeBufferPointer(rebasing: utf8.prefix { $0 != UInt8(ascii: "?") })) }
    }

    private mutating func attribute(_ key: AttributeKey, _ value: UnsafeBufferPointer<UInt8>, field: Int = 9) {
        // AnyValue.string_value (1), in KeyValue.value (2).
        let anyValue = 1 + Self.varintSize(value.count) + value.count
        keyValueHead(key, field: field, anyValue: anyValue)
        appendByte(0x0A)
        varint(UInt64(value.count))
        append(value)
    }

    fileprivate mutating func attribute(_ key: AttributeKey, _ value: Int) {
        // AnyValue.int_value (3), in KeyValue.value (2).
        let number = UInt64(bitPattern: Int64(value))
        keyValueHead(key, field: 9, anyValue: 1 + Self.varintSize(number))
        appendByte(0x18)
        varint(number)
    }

    private mutating func keyValueHead(_ key: AttributeKey, field: Int, anyValue: Int) {
        let keyValue = key.bytes.count + 1 + Self.varintSize(anyValue) + anyValue
        varint(UInt64(field) << 3 | 2)
        varint(UInt64(keyValue))
        key.bytes.withUnsafeBufferPointer { append($0) }
        appendByte(0x12)
        varint(UInt64(anyValue))
    }
}

/// An attribute's key as a KeyValue begins: field 1, its length, its bytes.
struct AttributeKey {
    let bytes: [UInt8]
    init(_ name: String) { bytes = [0x0A, UInt8(name.utf8.count)] + Array(name.utf8) }

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
