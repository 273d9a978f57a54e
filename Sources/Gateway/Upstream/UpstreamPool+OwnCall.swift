import NIOCore
import NIOHTTP1
import Rewriter

extension UpstreamPool {
    /// One whole request and its whole answer, for the gateway's own calls
    /// (a credential refresh, a health check of `endpoint`, span export, a
    /// filter's http_call, a cache revalidation): one try through the path a
    /// client's try takes (`OwnCall`), to an endpoint the balance picks unless
    /// one is given. `parts`: a body sent as the buffers it is already in,
    /// not joined first (the request then says only its length).
    func ownCall(_ request: UpstreamRequest, parts: [ByteBuffer]? = nil, upstream: UpstreamConfig, endpoint: Endpoint? = nil,
                 timeout: Duration, maxBodyBytes: Int) -> EventLoopFuture<OwnCall.Contents> {
        let call = OwnCall(request, parts: parts, promise: eventLoop.makePromise(), maxBodyBytes: maxBodyBytes)
        guard let state = endpoint?.upstream ?? states[upstream.name] else {
            call.fail(.unsupported("echo is answered in process"))
            return call.promise.futureResult
        }
        let endpoint = endpoint ?? state.pick(exclude: nil, random: UInt64.random(in: 0 ... .max))
        call.start(on: endpoint, of: state, pool: self, timeout: timeout)
        return call.promise.futureResult
    }
}

/// One of the gateway's own calls: a single try through the path a
/// client's try takes — a connection from `UpstreamPool.connection(to:…)`
/// (an idle pooled one, or a wait told back as a `PoolWaiter`), the request
/// by `send` or `sendStreamed`, the answer read whole as an
/// `UpstreamResponseDelegate` — bounded in time (a connection that comes
/// after the deadline is not used: nothing goes out late) and in size. It
/// takes no route's retries and is not held back by the upstream's
/// `max_pending`: a health check refused by a full queue would eject a
/// healthy endpoint, and a refused credential refresh would fail the call
/// waiting for it (Envoy's health checks skip its circuit breakers too).
final class OwnCall: PoolWaiter, UpstreamResponseDelegate {
    /// The whole answer.
    struct Contents: Sendable {
        var status: Int
        var headers: HeaderList
        var body: [UInt8]
    }

    let promise: EventLoopPromise<Contents>
    private let request: UpstreamRequest
    private let parts: [ByteBuffer]?
    private let maxBodyBytes: Int
    private var head: ResponseHead?
    private var body: [UInt8] = []
    private var isDone = false
    /// Its connection once it has one; where it waits, and its place in
    /// the queue, until then.
    private var connection: (any UpstreamConnection)?
    private var place: (pool: UpstreamPool, endpoint: Endpoint)?
    private var waiting: UpstreamPool.WaiterID?
    private var timer: Scheduled<Void>?

    init(_ request: UpstreamRequest, parts: [ByteBuffer]?, promise: EventLoopPromise<Contents>, maxBodyBytes: Int) {
        self.request = request
        self.parts = parts
        self.promise = promise
        self.maxBodyBytes = maxBodyBytes
    }

    func start(on endpoint: Endpoint, of state: UpstreamState, pool: UpstreamPool, timeout: Duration) {
        place = (pool, endpoint)
        timer = pool.eventLoop.assumeIsolated().scheduleTask(in: timeout.timeAmount) { [self] in
            fail(.timeout("no response within \(timeout)"))
        }
        _ = pool.connection(to: endpoint, of: state, now: .now(), for: self, token: (), limited: false)
    }

    /// The call is over without an answer: its wait or its connection goes.
    func fail(_ error: UpstreamError) {
        guard !isDone else { return }
        if let waiting, let place { place.pool.cancel(waiting, endpoint: place.endpoint) }
        finish()
        connection?.abandon()
        connection = nil
        promise.fail(error)
    }

    private func finish() {
        isDone = true
        timer?.cancel()
        timer = nil
        waiting = nil
        place = nil
    }

    // MARK: PoolWaiter

    func connectionReady(_ connection: any UpstreamConnection, _ token: Void) -> Bool {
        guard !isDone else { return false }
        waiting = nil
        self.connection = connection
        if let parts {
            var request = request
            request.framing = .length(parts.reduce(0) { $0 + $1.readableBytes })
            _ = connection.sendStreamed(request, parts: parts, end: true, delegate: self)
        } else {
            connection.send(request, delegate: self)
        }
        return true
    }

    func connectFailed(_ error: UpstreamError, _ token: Void) -> Bool {
        guard !isDone else { return false }
        fail(error)
        return true
    }

    /// Not one of a route's pending calls.
    func waits(on state: UpstreamState, _ token: Void) {}

    func queued(_ id: UpstreamPool.WaiterID?, _ token: Void) { if !isDone { waiting = id } }

    func waitEnded(_ token: Void) { waiting = nil }

    // MARK: UpstreamResponseDelegate

    func upstreamHead(_ head: consuming ResponseHead) { self.head = head }

    func upstreamBody(_ buffer: ByteBuffer) {
        body.append(contentsOf: buffer.readableBytesView)
        if body.count > maxBodyBytes { fail(.reset("the response exceeds \(maxBodyBytes) bytes")) }
    }

    func upstreamEnd() {
        guard !isDone, let head else { return }
        finish()
        connection = nil
        promise.succeed(Contents(status: Int(head.status.code), headers: head.headers, body: body))
    }

    func upstreamFailed(_ error: UpstreamError, progress: TryProgress) {
        connection = nil
        fail(error)
    }

    func upstreamWritabilityChanged(_ writable: Bool) {}
    func upstreamReadComplete() {}
    func upstreamSwitched(_ head: ResponseHead, connection: any UpstreamConnection) {
        connection.close()
        self.connection = nil
        fail(.reset("the upstream switched protocols"))
    }
}
