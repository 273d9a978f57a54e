import Rewriter
import Yams

extension ConfigReader {
    /// `tracing: {propagate, start, export: {otlp: {...}}}`.
    func readTracing(_ node: Node, _ path: String) -> TracingConfig {
        var tracing = TracingConfig()
        guard let fields = mapping(node, path, known: ["propagate", "start", "export"]) else { return tracing }
        defer { fields.finish() }
        if let n = fields.take("propagate"), let v = bool(n, fields.path("propagate")) { tracing.propagate = v }
        if let n = fields.take("start"), let v = bool(n, fields.path("start")) { tracing.start = v }
        if let n = fields.take("export") {
            tracing.export = readSpanExport(n, fields.path("export"))
            // Spans follow the trace a call carries: without one there is nothing to export.
            if !tracing.isOn { report(n, fields.path("export"), "spans need a trace: set propagate or start (or both)") }
        }
        return tracing
    }

    private func readSpanExport(_ node: Node, _ path: String) -> SpanExportConfig? {
        guard let fields = mapping(node, path, known: ["otlp"]) else { return nil }
        defer { fields.finish() }
        guard let n = fields.take("otlp") else {
            report(node, fields.path("otlp"), "missing")
            return nil
        }
        guard let otlp = mapping(n, fields.path("otlp"), known: ["endpoint", "protocol", "sample_ratio", "service_name", "headers", "timeout"])
        else { return nil }
        defer { otlp.finish() }
        var export: SpanExportConfig?
        if let n = otlp.take("endpoint"), let text = string(n, otlp.path("endpoint")) {
            if let url = UpstreamURL(text), url.query == nil {
                export = SpanExportConfig(endpoint: url)
            } else {
                report(n, otlp.path("endpoint"), "expected http(s)://host[:port][/path], found '\(text)'")
            }
        } else if !otlp.has("endpoint") {
            report(n, otlp.path("endpoint"), "missing")
        }
        if let n = otlp.take("protocol"), let v = oneOf(n, otlp.path("protocol"), SpanExportConfig.Transport.self) {
            export?.transport = v
            if v == .grpc, export?.endpoint.basePath.isEmpty == false { report(n, otlp.path("endpoint"), "a gRPC endpoint has no path") }
        }
        if let n = otlp.take("sample_ratio") {
            if case .scalar(let scalar) = n, let ratio = Double(scalar.string), (0...1).contains(ratio) {
                export?.sampleRatio = ratio
            } else {
                report(n, otlp.path("sample_ratio"), "expected a number from 0 to 1, found \(describe(n))")
            }
        }
        if let n = otlp.take("service_name"), let name = string(n, otlp.path("service_name")) {
            if name.isEmpty { report(n, otlp.path("service_name"), "must not be empty") } else { export?.serviceName = name }
        }
        if let n = otlp.take("headers") {
            let headers = readHeaderFields(n, otlp.path("headers"))
            for field in headers { keepSecret(field.value) }
            export?.headers = HeaderList(headers)
        }
        if let n = otlp.take("timeout"), let timeout = duration(n, otlp.path("timeout")) {
            if timeout > .zero && timeout <= .seconds(60) { export?.timeout = timeout } else { report(n, otlp.path("timeout"), "must be more than 0 and at most 60s") }
        }
        return export
    }
}
