import NIOCore
import NIOHTTP1
import Rewriter

/// Turns an upstream connection's bytes into response parts for the request
/// sent last (`expect` says which: a response to HEAD has no body). Lenient
/// only where no ambiguity follows: LF line ends, a body read until close;
/// a response framed both ways is read by Transfer-Encoding and its
/// connection not reused (`mustClose`), as RFC 9112 section 6.3 says.
struct HTTP1ResponseDecoder {
    private var head: HTTP1HeadReader
    private var body: HTTP1BodyReader?
    private var requestIsHEAD = false
    /// The response's framing, or its `Connection` field and version, leave
    /// the connection unusable for another request.
    private(set) var mustClose = false

    init(maxHeadBytes: Int) { head = HTTP1HeadReader(limit: maxHeadBytes, bareLF: true) }

    /// A request went out: its answer comes next.
    mutating func expect(method: HTTPMethod) {
        requestIsHEAD = method == .HEAD
        mustClose = false
    }

    /// Between answers: no part of one has been read.
    var isIdle: Bool { body == nil }

    mutating func next(_ buffer: inout ByteBuffer) throws(HTTP1ParseError) -> ResponsePart? {
        if var reader = body {
            body = nil
            let part: ResponsePart? = try reader.next(&buffer)
            if !reader.isDone { body = reader }
            return part
        }
        guard let length = try head.headLength(in: buffer) else { return nil }
        let (responseHead, fields) = try buffer.withUnsafeReadableBytes { bytes throws(HTTP1ParseError) in
            try Self.parse(UnsafeRawBufferPointer(rebasing: bytes[0..<length]))
        }
        buffer.moveReaderIndex(forwardBy: length)
        let code = responseHead.status.code
        // An interim answer (1xx but 101): the final one follows, its own head and body.
        if code < 200 && code != 101 { return .head(responseHead) }
        if !fields.connection.keepsAlive(version: responseHead.version) { mustClose = true }
        if code == 101 || code == 204 || code == 304 || requestIsHEAD {
            // 101: the connection becomes a tunnel, never reused for HTTP.
            if code == 101 { mustClose = true }
            body = HTTP1BodyReader(.length(0))
        } else {
            body = HTTP1BodyReader(try framing(responseHead.headers, fields))
        }
        return .head(responseHead)
    }

    /// The upstream closed the connection: the end of a response read until
    /// close, or a response cut short (thrown).
    mutating func inputClosed() throws(HTTP1ParseError) -> ResponsePart? {
        guard var reader = body else { return nil }
        body = nil
        return try reader.inputClosed() ? .end(nil) : nil
    }

    private static func parse(_ bytes: UnsafeRawBufferPointer) throws(HTTP1ParseError) -> (ResponseHead, HTTP1HeadReader.KeyFields) {
        var lines = HTTP1HeadReader.Lines(bytes: bytes, bareLF: true)
        guard let first = try lines.next() else { throw .malformed("no status line") }
        let (version, code) = try HTTP1HeadReader.statusLine(bytes, first)
        let (headers, fields) = try HTTP1HeadReader.fields(bytes, &lines)
        return (ResponseHead(version: version, status: HTTPResponseStatus(statusCode: code), headers: headers), fields)
    }

    private mutating func framing(_ headers: HeaderList, _ fields: HTTP1HeadReader.KeyFields) throws(HTTP1ParseError) -> HTTP1BodyReader.Framing {
        let length = fields.length ? try HTTP1RequestDecoder.contentLength(headers) : nil
        guard fields.coding else {
            if let length { return .length(length) }
            mustClose = true
            return .untilClose
        }
        if length != nil { mustClose = true }
        let last = headers.listItems("Transfer-Encoding").last
        if let last, last.utf8.elementsEqual("chunked".utf8, by: { $0 | 0x20 == $1 }) { return .chunked }
        mustClose = true
        return .untilClose
    }
}
