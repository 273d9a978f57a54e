import NIOCore
import NIOHTTP1
import Rewriter

extension UpstreamPool {
    /// One whole request and its whole answer, for the gateway's own calls
    /// (a credential refresh, a health check of `endpoint`): pooled like any
    /// call, bounded in time and size; to an endpoint the balance picks
    /// unless one is given. `parts`: a body sent as the buffers it is
    /// already in, not joined first (the request then says only its length).
    func ownCall(_ request: UpstreamRequest, parts: [ByteBuffer]? = nil, upstream: UpstreamConfig, endpoint: Endpoint? = nil,
                  timeout: Duration, maxBodyBytes: Int) -> EventLoopFuture<BufferedResponse.Contents> {
        let response = BufferedResponse(promise: eventLoop.makePromise(), maxBodyBytes: maxBodyBytes)
        guard let endpoint = endpoint ?? states[upstream.name]?.pick(exclude: nil, random: UInt64.random(in: 0 ... .max)) else {
            response.fail(.unsupported("echo is answered in process"))
            return response.promise.futureResult
        }
        let loop = eventLoop.assumeIsolated()
        let send = { (connection: any UpstreamConnection) in
            if let parts {
                var request = request
                request.framing = .length(parts.reduce(0) { $0 + $1.readableBytes })
                _ = connection.sendStreamed(request, parts: parts, end: true, delegate: response)
            } else {
                connection.send(request, delegate: response)
            }
            let timer = loop.scheduleTask(in: timeout.timeAmount) {
                connection.abandon()
                response.fail(.timeout("no response within \(timeout)"))
            }
            response.promise.futureResult.assumeIsolated().whenComplete { result in
                timer.cancel()
                if case .failure = result { connection.abandon() }
            }
        }
        let acquisition = acquire(upstream, endpoint: endpoint) { result in
            switch result {
            case .success(let connection): send(connection)
            case .failure(let error): response.fail(error as? UpstreamError ?? .connectFailure("\(error)"))
            }
            return true
        }
        if case .ready(let connection) = acquisition { send(connection) }
        return response.promise.futureResult
    }
}

/// Collects an upstream's whole answer.
final class BufferedResponse: UpstreamResponseDelegate {
    struct Contents: Sendable {
        var status: Int
        var headers: HeaderList
        var body: [UInt8]
    }

    let promise: EventLoopPromise<Contents>
    private let maxBodyBytes: Int
    private var head: ResponseHead?
    private var body: [UInt8] = []
    private var isDone = false

    init(promise: EventLoopPromise<Contents>, maxBodyBytes: Int) {
        self.promise = promise
        self.maxBodyBytes = maxBodyBytes
    }

    func fail(_ error: UpstreamError) {
        guard !isDone else { return }
        isDone = true
        promise.fail(error)
    }

    func upstreamHead(_ head: consuming ResponseHead) { self.head = head }

    func upstreamBody(_ buffer: ByteBuffer) {
        body.append(contentsOf: buffer.readableBytesView)
        if body.count > maxBodyBytes { fail(.reset("the response exceeds \(maxBodyBytes) bytes")) }
    }

    func upstreamEnd() {
        guard !isDone, let head else { return }
        isDone = true
        promise.succeed(Contents(status: Int(head.status.code), headers: head.headers, body: body))
    }

    func upstreamFailed(_ error: UpstreamError, progress: TryProgress) { fail(error) }
    func upstreamWritabilityChanged(_ writable: Bool) {}
    func upstreamReadComplete() {}
    func upstreamSwitched(_ head: ResponseHead, connection: any UpstreamConnection) {
        connection.close()
        fail(.reset("the upstream switched protocols"))
    }
}
