import NIOCore
import NIOHTTP1

extension UpstreamPool {
    /// One whole request and its whole answer, for the gateway's own calls
    /// (a credential refresh): pooled like any call, bounded in time and size.
    func exchange(_ request: UpstreamRequest, upstream: UpstreamConfig, timeout: Duration, maxBodyBytes: Int) -> EventLoopFuture<BufferedResponse.Answer> {
        acquire(upstream).flatMap { connection in
            let response = BufferedResponse(promise: self.eventLoop.makePromise(), maxBodyBytes: maxBodyBytes)
            connection.send(request, delegate: response)
            let timer = self.eventLoop.scheduleTask(in: timeout.timeAmount) {
                connection.abandon()
                response.fail(.timeout("no answer within \(timeout)"))
            }
            response.promise.futureResult.whenComplete { result in
                timer.cancel()
                if case .failure = result { connection.abandon() }
            }
            return response.promise.futureResult
        }
    }
}

/// Collects an upstream's whole answer.
final class BufferedResponse: UpstreamResponseDelegate {
    struct Answer: Sendable {
        var status: Int
        var headers: HTTPHeaders
        var body: [UInt8]
    }

    let promise: EventLoopPromise<Answer>
    private let maxBodyBytes: Int
    private var head: HTTPResponseHead?
    private var body: [UInt8] = []
    private var done = false

    init(promise: EventLoopPromise<Answer>, maxBodyBytes: Int) {
        self.promise = promise
        self.maxBodyBytes = maxBodyBytes
    }

    func fail(_ error: UpstreamError) {
        guard !done else { return }
        done = true
        promise.fail(error)
    }

    func upstreamHead(_ head: consuming HTTPResponseHead) { self.head = head }

    func upstreamBody(_ buffer: ByteBuffer) {
        body.append(contentsOf: buffer.readableBytesView)
        if body.count > maxBodyBytes { fail(.reset("the answer exceeds \(maxBodyBytes) bytes")) }
    }

    func upstreamEnd() {
        guard !done, let head else { return }
        done = true
        promise.succeed(Answer(status: Int(head.status.code), headers: head.headers, body: body))
    }

    func upstreamFailed(_ error: UpstreamError, responseStarted: Bool) { fail(error) }
    func upstreamWritabilityChanged(_ writable: Bool) {}
    func upstreamReadComplete() {}
}
