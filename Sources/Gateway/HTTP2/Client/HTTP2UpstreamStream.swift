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
    /// The request body's queue and the response's flow control.
    private var stream = HTTP2StreamState()

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
        if let bytes = request.body, !bytes.isEmpty { stream.send(session.allocator.buffer(bytes: bytes)) }
        stream.endSending()
        submit(request, delegate: delegate, hasBody: !stream.outbound.isEmpty)
        exchange.requestCompleted()
    }

    func sendHead(_ request: UpstreamRequest, delegate: UpstreamResponseDelegate) {
        submit(request, delegate: delegate, hasBody: true)
    }

    private func submit(_ request: UpstreamRequest, delegate: UpstreamResponseDelegate, hasBody: Bool) {
        // An HTTP/2 stream never switches: a 101 on it is refused.
        exchange.begin(delegate, on: endpoint, upgrade: nil)
        id = session.submit(self, HeaderBlock(request: request, scheme: session.scheme), hasBody: hasBody)
        // The session no longer takes streams (the upstream's GOAWAY came first): nothing went out.
        guard id > 0 else { return failed(.refusedStream("upstream \(upstream) takes no more streams on this connection")) }
        exchange.written()
    }

    func sendBody(_ buffer: ByteBuffer) {
        stream.send(buffer)
        resume()
    }

    func sendEnd() {
        exchange.requestCompleted()
        stream.endSending()
        resume()
    }

    private func resume() {
        guard stream.open, id > 0 else { return }
        if stream.resumeNeeded() { session.resume(self) }
        session.needsSend()
    }

    var isWritable: Bool { session.isWritable && stream.fits(window: session.sendWindow(self)) }

    func setReading(_ on: Bool) {
        let count = stream.setReading(on)
        guard count > 0 else { return }
        session.consume(self, count)
        session.needsSend()
    }

    func giveBack() {}
    func startTunnel(_ tunnel: Tunnel) -> Bool { false }

    /// The stream closes by itself once both sides ended; it is reset if ours had not.
    func responseEnded(requestComplete: Bool) {
        if !requestComplete { close() }
    }

    func close() {
        guard stream.open else { return }
        stream.cancel()
        guard id > 0 else { return }
        session.reset(self)
    }

    // MARK: From the session

    func readBody(into buffer: UnsafeMutableRawBufferPointer) -> HTTP2BodyRead {
        switch stream.read(into: buffer) {
        case .deferred:
            return .deferred
        case .bytes(let copied, let end):
            if copied > 0, !stream.sendingEnded { session.bodyDrained(self) }
            return .bytes(copied, end: end, trailers: false)
        }
    }

    func mayWriteAgain() {
        if stream.open, isWritable { writabilityChanged() }
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
        let consumed = stream.received(bytes.count)
        if consumed > 0 { session.consume(self, consumed) }
        received(.body(session.allocator.buffer(bytes: bytes)))
    }

    func ended() {
        received(.end(trailers))
    }

    /// The connection went with the stream still open.
    func connectionClosed() {
        stream.cancel()
        exchangeClosed()
    }

    /// The stream closed; a response that had not ended is cut short.
    /// REFUSED_STREAM: the upstream did not process the request (RFC 9113 §8.7).
    func closed(errorCode: UInt32) {
        session.consumeConnection(stream.closed())
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
    /// ones but `te: trailers`, the one HTTP/2 carries (RFC 9113 §8.2.2; gRPC
    /// servers require it); a known body length is still stated (§8.1.1).
    init(request: UpstreamRequest, scheme: String) {
        self.init(capacity: request.headers.count + 4)
        add(":method", request.method)
        add(":scheme", scheme)
        add(":authority", request.headers["Host"] ?? "")
        add(":path", request.target)
        request.headers.withFields { fields in
            for i in fields.indices where !HeaderList.equalNames(fields[i].name, "Host") {
                if HeaderList.isHopByHop(fields[i].name), !HeaderList.equalNames(fields[i].name, "te") || fields[i].value != "trailers" { continue }
                add(fields[i].name, fields[i].value)
            }
        }
        if case .length(let length) = request.framing { add("content-length", String(length)) }
    }
}
