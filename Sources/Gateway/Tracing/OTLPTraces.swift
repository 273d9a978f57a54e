import W3CTraceContext

/// An OTLP `ExportTraceServiceRequest` (opentelemetry-proto 1.x,
/// `collector/trace/v1`) for a batch of spans, with the HTTP semantic
/// conventions' attributes written from each span's fields.
enum OTLPTraces {
    /// `wallOffset`: wall-clock minus monotonic nanoseconds, to date the spans.
    static func request(_ spans: [Span], serviceName: String, wallOffset: Int64) -> [UInt8] {
        var out = ProtobufWriter(capacity: 256 + spans.count * 320)
        // ExportTraceServiceRequest.resource_spans
        out.message(1) { resourceSpans in
            // ResourceSpans.resource: Resource.attributes
            resourceSpans.message(1) { resource in
                resource.attribute("service.name", serviceName, field: 1)
                resource.attribute("service.version", GatewayVersion.current, field: 1)
            }
            // ResourceSpans.scope_spans
            resourceSpans.message(2) { scopeSpans in
                scopeSpans.message(1) { scope in
                    scope.string(1, "gatewayd")
                    scope.string(2, GatewayVersion.current)
                }
                for span in spans { scopeSpans.message(2) { $0.span(span, wallOffset: wallOffset) } }
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
        string(5, span.name)
        integer(6, span.kind.rawValue)
        fixed64(7, UInt64(Int64(span.start) + wallOffset))
        fixed64(8, UInt64(Int64(span.end) + wallOffset))
        attribute("http.request.method", span.method)
        switch span.kind {
        case .server:
            if let target = span.path { attribute("url.path", String(target.prefix { $0 != "?" })) }
            if let version = span.protocolVersion { attribute("network.protocol.version", version) }
            if let peer = span.peer { attribute("client.address", peer) }
            if let route = span.target { attribute("gatewayd.route", route) }
            if let outcome = span.outcome { attribute("gatewayd.outcome", outcome) }
            attribute("gatewayd.tries", span.tries)
        case .client:
            if let upstream = span.target { attribute("gatewayd.upstream", upstream) }
            if let host = span.host {
                attribute("server.address", host)
                attribute("server.port", span.port)
            }
            if let peer = span.peer { attribute("network.peer.address", peer) }
            if span.tries > 0 { attribute("http.request.resend_count", span.tries) }
            if span.purpose != .call { attribute("gatewayd.purpose", span.purpose.rawValue) }
            if let reason = span.outcome { attribute("error.type", reason) }
        }
        if span.status > 0 { attribute("http.response.status_code", span.status) }
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

    /// A KeyValue: a span's attribute (field 9), or a resource's (field 1).
    fileprivate mutating func attribute(_ key: String, _ value: String, field: Int = 9) {
        message(field) { keyValue in
            keyValue.string(1, key)
            keyValue.message(2) { $0.string(1, value) }
        }
    }

    fileprivate mutating func attribute(_ key: String, _ value: Int) {
        message(9) { keyValue in
            keyValue.string(1, key)
            keyValue.message(2) { $0.integer(3, value) }
        }
    }
}

extension Span {
    var name: String {
        switch (kind, purpose) {
        case (.server, _): target.map { "\(method) \($0)" } ?? method
        case (.client, .call): "\(method) \(target ?? "")"
        case (.client, .refresh): "credential refresh \(target ?? "")"
        case (.client, .healthCheck): "health check \(target ?? "")"
        }
    }
}
