import CNGHTTP2
import NIOCore
import NIOHTTP1
import Rewriter

/// One stream of a multiplexed HTTP/2 upstream connection: it carries a
/// single request and is never pooled. The request body is queued here and
/// taken by libnghttp2 as the upstream's windows allow; reading the
/// response pauses by not consuming it, which shuts this stream's window only.
final class HTTP2UpstreamStream: UpstreamConnection, HTTP2BodySource {
    private let session: HTTP2UpstreamSession
    let upstream: String
    var exchange = UpstreamExchange()
    var peerAddress: String { session.peerAddress }
    var endpoint: Endpoint { session.endpoint }
    /// Set when the request is submitted.
    private(set) var id: Int32 = -1
    private var body = BodyQueue()
    /// libnghttp2 found the queue empty and waits for `resume`.
    private var deferred = false
    private var reading = true
    private var unconsumed = 0
    private var open = true

    /// The response as it arrives: fields of the block being read, then the head once given.
    private var status: Int?
    private var fields: [HeaderList.Field] = []
    private var headGiven = false
    private var trailers: HTTPHeaders?

    init(session: HTTP2UpstreamSession, upstream: String) {
        self.session = session
        self.upstream = upstream
    }

    func send(_ request: UpstreamRequest, delegate: UpstreamResponseDelegate) {
        if let bytes = request.body, !bytes.isEmpty { body.append(session.allocator.buffer(bytes: bytes)) }
        body.ended = true
        submit(request, delegate: delegate, hasBody: !body.isEmpty)
        exchange.requestComplete = true
    }

    func sendHead(_ request: UpstreamRequest, delegate: UpstreamResponseDelegate) {
        submit(request, delegate: delegate, hasBody: true)
    }

    private func submit(_ request: UpstreamRequest, delegate: UpstreamResponseDelegate, hasBody: Bool) {
        exchange.begin(delegate, on: endpoint)
        id = session.submit(self, HeaderBlock(request: request, scheme: session.scheme), hasBody: hasBody)
        // The session no longer takes streams (the upstream's GOAWAY came first): nothing went out.
        guard id > 0 else { return failed(.refusedStream("upstream \(upstream) takes no more streams on this connection")) }
        exchange.requestWritten = true
    }

    func sendBody(_ buffer: ByteBuffer) {
        body.append(buffer)
        resume()
    }

    func sendEnd() {
        exchange.requestComplete = true
        body.ended = true
        resume()
    }

    private func resume() {
        guard open, id > 0 else { return }
        if deferred {
            deferred = false
            session.resume(self)
        }
        session.needsSend()
    }

    var isWritable: Bool { session.isWritable && body.count < session.sendWindow(self) }

    func setReading(_ on: Bool) {
        guard reading != on else { return }
        reading = on
        guard on, unconsumed > 0 else { return }
        session.consume(self, unconsumed)
        unconsumed = 0
        session.needsSend()
    }

    func giveBack() {}
    func startTunnel(_ tunnel: Tunnel) -> Bool { false }

    /// The stream closes by itself once both sides ended; it is reset if ours had not.
    func responseEnded() {
        if !exchange.requestComplete { close() }
    }

    func close() {
        guard open else { return }
        open = false
        body.removeAll()
        guard id > 0 else { return }
        session.reset(self)
    }

    // MARK: From the session

    func readBody(into buffer: UnsafeMutableRawBufferPointer) -> HTTP2BodyRead {
        let copied = body.read(into: buffer)
        if copied > 0, !body.ended { session.bodyDrained(self) }
        if body.isEmpty, body.ended { return .bytes(copied, end: true, trailers: false) }
        if copied > 0 { return .bytes(copied, end: false, trailers: false) }
        deferred = true
        return .deferred
    }

    func mayWriteAgain() {
        if open, isWritable { writabilityChanged() }
    }

    func header(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        if name.first == UInt8(ascii: ":") {
            // libnghttp2 lets only `:status` through on a response, and checks it is three digits.
            status = Int(String(decoding: value, as: UTF8.self))
        } else if headGiven {
            if trailers == nil { trailers = HTTPHeaders() }
            trailers?.add(name: String(decoding: name, as: UTF8.self), value: String(decoding: value, as: UTF8.self))
        } else {
            fields.append(HeaderList.Field(name: String(decoding: name, as: UTF8.self), value: String(decoding: value, as: UTF8.self)))
        }
    }

    /// A header block ended: an interim or final response head, or trailers.
    func headersEnded(endStream: Bool) {
        if let status, !headGiven {
            self.status = nil
            let head = ResponseHead(version: HTTPVersion(major: 2, minor: 0), status: HTTPResponseStatus(statusCode: status),
                                    headers: HeaderList(fields))
            fields = []
            if status >= 200 { headGiven = true }
            received(.head(head))
        }
        if endStream { ended() }
    }

    func dataReceived(_ bytes: UnsafeRawBufferPointer) {
        if reading { session.consume(self, bytes.count) } else { unconsumed += bytes.count }
        received(.body(session.allocator.buffer(bytes: bytes)))
    }

    func ended() {
        received(.end(trailers))
    }

    /// The connection went with the stream still open.
    func connectionClosed() {
        open = false
        body.removeAll()
        exchangeClosed()
    }

    /// The stream closed; a response that had not ended is cut short.
    /// REFUSED_STREAM: the upstream did not process the request (RFC 9113 §8.7).
    func closed(errorCode: UInt32) {
        open = false
        body.removeAll()
        session.consumeConnection(unconsumed)
        unconsumed = 0
        guard exchange.delegate != nil else { return }
        if errorCode == NGHTTP2_REFUSED_STREAM.rawValue {
            failed(.refusedStream("upstream \(upstream) refused the stream"))
        } else {
            failed(.reset("upstream \(upstream) reset the stream (HTTP/2 error \(errorCode))"))
        }
    }
}

extension HeaderBlock {
    /// A request as an HTTP/2 header block: the pseudo-header fields first
    /// (`Host` becomes `:authority`), then the fields without hop-by-hop
    /// ones; a known body length is still stated (RFC 9113 §8.1.1).
    init(request: UpstreamRequest, scheme: String) {
        self.init(capacity: request.headers.count + 4)
        add(":method", request.method)
        add(":scheme", scheme)
        add(":authority", request.headers["Host"] ?? "")
        add(":path", request.target)
        request.headers.withFields { fields in
            for i in fields.indices where !HeaderList.isHopByHop(fields[i].name) && !HeaderList.equalNames(fields[i].name, "Host") {
                add(fields[i].name, fields[i].value)
            }
        }
        if case .length(let length) = request.framing { add("content-length", String(length)) }
    }
}
