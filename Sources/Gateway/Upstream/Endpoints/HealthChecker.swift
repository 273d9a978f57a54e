import NIOCore
import Rewriter
import Synchronization
import W3CTraceContext

/// Sends every endpoint of every upstream with a `health_check` its check
/// request, from one event loop for the whole process (not once per loop),
/// over the upstream's own protocol and pooled connections. The first check
/// of each endpoint comes at a random point of the first interval and each
/// next one after the interval ±10%, so checks do not arrive in bursts.
/// With span export on, a check sampled at its ratio is a trace of its own.
final class HealthChecker: Sendable {
    private let loop: any EventLoop
    private let pools: UpstreamPools
    private let spans: SpanExporter?
    private let stopped = Atomic(false)

    /// Answers longer than this are cut: a check reads a status and a small body.
    static let maxBodyBytes = 64 * 1024

    init(loop: any EventLoop, pools: UpstreamPools, spans: SpanExporter?) {
        self.loop = loop
        self.pools = pools
        self.spans = spans
    }

    func start() {
        for state in pools.states.values {
            guard let check = state.config.healthCheck else { continue }
            let request = UpstreamRequest(method: check.method, target: state.config.url?.join(check.path) ?? check.path,
                                          headers: ["Host": state.config.authority, "User-Agent": "gatewayd-health-check"], body: nil)
            for endpoint in state.endpoints {
                schedule(endpoint, request: request, check: check, after: check.interval * Double.random(in: 0..<1))
            }
        }
    }

    /// No check starts after this (a reload made a new checker).
    func stop() { stopped.store(true, ordering: .relaxed) }

    private func schedule(_ endpoint: Endpoint, request: UpstreamRequest, check: HealthCheckConfig, after delay: Duration) {
        loop.scheduleTask(in: delay.timeAmount) { [self] in
            guard !stopped.load(ordering: .relaxed) else { return }
            let pool = pools.pool(for: loop)
            var sent = request
            let span = traced(check, endpoint: endpoint, request: &sent)
            pool.ownCall(sent, upstream: endpoint.upstream.config, endpoint: endpoint, timeout: check.timeout,
                          maxBodyBytes: Self.maxBodyBytes).whenComplete { [self] result in
                if var span, let spans {
                    span.end = NIODeadline.now().uptimeNanoseconds
                    switch result {
                    case .success(let answer): span.status = answer.status
                    case .failure(let error): span.outcome = (error as? UpstreamError)?.name ?? "error"
                    }
                    spans.record(span)
                }
                let (passed, reason) = Self.judge(result, check: check)
                endpoint.upstream.checked(endpoint, passed: passed, reason: reason)
                schedule(endpoint, request: request, check: check, after: check.interval * Double.random(in: 0.9...1.1))
            }
        }
    }

    /// The check's span, when it is sampled: a trace of its own, named in its request's `traceparent`.
    private func traced(_ check: HealthCheckConfig, endpoint: Endpoint, request: inout UpstreamRequest) -> Span? {
        guard let spans else { return nil }
        let traceID = TraceID.random()
        guard CallTrace.sampledAt(spans.config.sampleRatio, traceID) else { return nil }
        let spanID = SpanID.random()
        request.headers.set("traceparent", CallTrace.traceparent(traceID, spanID, .sampled))
        return Span(traceID: traceID, spanID: spanID, kind: .client, purpose: .healthCheck, start: NIODeadline.now().uptimeNanoseconds,
                    method: check.method, target: endpoint.upstream.config.name, host: endpoint.url.host, port: endpoint.url.port)
    }

    /// Passed: the status is expected and no validator says fail or retry.
    static func judge(_ result: Result<OwnCall.Contents, any Error>, check: HealthCheckConfig) -> (Bool, String) {
        switch result {
        case .failure(let error):
            return (false, "\(error)")
        case .success(let response):
            guard check.expect.contains(where: { $0.contains(response.status) }) else { return (false, "status \(response.status)") }
            var body = ParsedBody(response.body)
            let outcome = TryOutcome.response(status: response.status, headers: response.headers, body: response.body)
            for validator in check.validate {
                switch validator.evaluate(outcome, body: &body) {
                case .next: continue
                case .fail, .retry: return (false, "\(validator.label) refused the answer")
                case .accept, .pass, .refresh: return (true, "")
                }
            }
            return (true, "")
        }
    }
}
