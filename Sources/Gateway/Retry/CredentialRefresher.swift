import NIOCore
import Rewriter
import Synchronization

/// A route's `refresh` action: one credential (a header value captured from a
/// token service's JSON answer), shared by every call of the route on every
/// event loop. A call refused with an older credential reuses the newer one;
/// calls that need a new one wait for a single refresh; a refresh starts at
/// most once per `min_interval`, so a broken credential cannot storm the
/// token service.
final class CredentialRefresher: Sendable {
    struct Credential: Sendable, Equatable {
        /// Counts successful refreshes: 0 until the first.
        var generation: Int
        /// The header value (`format` filled in).
        var value: String?
    }

    enum Start {
        /// A newer credential than the refused one exists already.
        case ready(Credential)
        /// A refresh is under way (started by this call or another).
        case wait(EventLoopFuture<Credential>)
        /// The last refresh started less than `min_interval` ago.
        case throttled
    }

    private struct State {
        var credential = Credential(generation: 0, value: nil)
        var lastStart: NIODeadline?
        var waiters: [EventLoopPromise<Credential>]?
    }

    let spec: RefreshSpec
    let upstream: UpstreamConfig
    /// With `share: fleet` and a store: the fleet's turn around each refresh.
    let fleet: FleetCredential?
    private let state = Mutex(State())

    init(spec: RefreshSpec, upstream: UpstreamConfig, fleet: FleetCredential? = nil) {
        self.spec = spec
        self.upstream = upstream
        self.fleet = fleet
    }

    var current: Credential { state.withLock { $0.credential } }

    /// A try sent with credential generation `used` was refused. When this
    /// call is the one to refresh, `perform` makes the refresh call and
    /// yields the captured header value.
    func refresh(after used: Int, on eventLoop: EventLoop, perform: @escaping () -> EventLoopFuture<String>) -> Start {
        let (start, result, usedValue): (Bool, Start, String?) = state.withLock { s in
            if s.credential.generation > used { return (false, .ready(s.credential), nil) }
            if s.waiters != nil {
                let waiter = eventLoop.makePromise(of: Credential.self)
                s.waiters!.append(waiter)
                return (false, .wait(waiter.futureResult), nil)
            }
            let now = NIODeadline.now()
            if let last = s.lastStart, now - last < spec.minInterval.timeAmount { return (false, .throttled, nil) }
            let waiter = eventLoop.makePromise(of: Credential.self)
            s.lastStart = now
            s.waiters = [waiter]
            return (true, .wait(waiter.futureResult), s.credential.value)
        }
        if start {
            let refreshed = fleet?.refresh(after: usedValue, on: eventLoop, perform: perform) ?? perform()
            refreshed.whenComplete { [self] outcome in
                let (waiters, credential) = state.withLock { s in
                    let waiters = s.waiters ?? []
                    s.waiters = nil
                    if case .success(let value) = outcome { s.credential = Credential(generation: s.credential.generation + 1, value: value) }
                    return (waiters, s.credential)
                }
                for waiter in waiters {
                    switch outcome {
                    case .success: waiter.succeed(credential)
                    case .failure(let error): waiter.fail(error)
                    }
                }
            }
        }
        return result
    }
}

extension CredentialRefresher {
    /// A call's try with credential generation `used` was refused: when the
    /// call is the one to refresh, the token service is called through
    /// `pool` (its client span, when the call is traced, goes to `sink`).
    func refresh(after used: Int, through pool: UpstreamPool, timeout: Duration, maxBodyBytes: Int, metrics: RouteMetrics,
                 traced: (span: Span, traceparent: String)?, sink: SpanSink?) -> Start {
        refresh(after: used, on: pool.eventLoop) { [spec, upstream] in
            var request = spec.request(to: upstream)
            if let traced { request.headers.set("traceparent", traced.traceparent) }
            let started = NIODeadline.now()
            return pool.ownCall(request, upstream: upstream, timeout: timeout, maxBodyBytes: maxBodyBytes)
                .always { answer in
                    guard var span = traced?.span, let sink else { return }
                    (span.start, span.end) = (started.uptimeNanoseconds, NIODeadline.now().uptimeNanoseconds)
                    switch answer {
                    case .success(let answer): span.status = answer.status
                    case .failure(let error): span.outcome = (error as? UpstreamError)?.name ?? "error"
                    }
                    sink.send(span)
                }
                .flatMapThrowing { answer in try spec.capture(status: answer.status, body: answer.body) }
                .always { metrics.refreshFinished(ok: (try? $0.get()) != nil) }
        }
    }
}

/// Why a refresh gave no credential; the waiting calls answer 502 with it.
struct RefreshError: Error, CustomStringConvertible {
    var description: String
}

extension RefreshSpec {
    /// The refresh request as it goes to `upstream`.
    func request(to upstream: UpstreamConfig) -> UpstreamRequest {
        var headers: HeaderList = ["Host": upstream.authority]
        let bytes = body.map(JSONWriter.bytes)
        if bytes != nil { headers.add("Content-Type", "application/json") }
        self.headers.apply(to: &headers)
        headers.remove("Content-Length")
        headers.remove("Transfer-Encoding")
        return UpstreamRequest(method: method, target: upstream.url?.join(path) ?? path, headers: headers, body: bytes)
    }

    /// The header value captured from the token service's answer.
    func capture(status: Int, body: [UInt8]) throws(RefreshError) -> String {
        guard (200..<300).contains(status) else { throw RefreshError(description: "the refresh call answered \(status)") }
        let json: JSONValue
        do { json = try JSONReader.parse(body) } catch {
            throw RefreshError(description: "the refresh answer is not JSON: \(error)")
        }
        let value: String
        switch capturePointer.resolve(in: json) {
        case .string(let text): value = text
        case .number(let spelling): value = spelling
        case nil: throw RefreshError(description: "the refresh answer has no \(capturePointer)")
        default: throw RefreshError(description: "\(capturePointer) in the refresh answer is not a string or number")
        }
        guard HeaderList.isValidValue(value) else { throw RefreshError(description: "the captured value is not a valid header value") }
        return format.replacing("{}", with: value)
    }
}
