import W3CTraceContext

/// A finished span as the exporter sends it. Its fields are the values the
/// call already holds (shared strings, numbers): the OpenTelemetry
/// attributes are written from them only when a batch is encoded, off the
/// event loops. Times are monotonic (uptime ns); the exporter turns them
/// into wall-clock time as it sends.
struct Span: Sendable {
    enum Kind: Int {
        case server = 2
        case client = 3
    }

    /// What a client span was for.
    enum Purpose: String, Sendable {
        case call
        case refresh = "credential-refresh"
        case healthCheck = "health-check"
    }

    var traceID: TraceID
    var spanID: SpanID
    var parentID: SpanID?
    var kind: Kind
    var purpose = Purpose.call
    var start: UInt64
    var end: UInt64 = 0
    var method: String
    /// Server: the route, if one matched. Client: the upstream.
    var target: String?
    /// Server: the request's path.
    var path: String?
    /// Client: the endpoint (host and port), as attributes written once
    /// per endpoint (`OTLPTraces.endpointAttributes`) or, for a refresh or
    /// a health check, one by one.
    var endpointAttributes: [UInt8] = []
    var host: String?
    var port = 0
    /// Server: the client's address. Client: the address connected to.
    var peer: String?
    var status = 0
    /// Server: how the call ended (the access log's outcome). Client: why the try failed.
    var outcome: String?
    /// Server: tries made. Client: tries before this one (`http.request.resend_count`).
    var tries = 0
    /// Server: `1.1` or `2`.
    var protocolVersion: String?

    /// OpenTelemetry's status: an error for a failed try, a client span's
    /// 4xx or 5xx, a server span's 5xx and an answer cut short (HTTP
    /// semantic conventions).
    var isError: Bool {
        switch kind {
        case .client: outcome != nil || status >= 400
        case .server: status >= 500 || outcome?.hasPrefix("cut-short") == true
        }
    }
}
