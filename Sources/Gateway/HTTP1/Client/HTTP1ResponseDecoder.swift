import NIOCore
import NIOHTTP1
import Rewriter

/// Turns an upstream connection's bytes into response parts for the request
/// sent last (`expect` says which: a response to HEAD has no body). Lenient
/// only where no ambiguity follows: LF line ends, a body read until close.
/// A response framed both ways is refused, as nginx refuses it (RFC 9112
/// section 6.3: it "ought to be handled as an error").
struct HTTP1ResponseDecoder {
    private var head: HTTP1HeadReader
    private var body: HTTP1BodyReader?
    private var requestIsHEAD = false
    /// The response's framing, or its `Connection` field and version, leave
    /// the connection unusable for another request.
    private(set) var mustClose = false
    /// The answer is body-less by rule (to HEAD, a 204, a 304) though its
    /// head announced a body: a non-conforming upstream may still send it.
    private(set) var announcedBodyWithheld = false

    init(maxHeadBytes: Int) { head = HTTP1HeadReader(limit: maxHeadBytes, bareLF: true) }

    /// A request went out: its answer comes next.
    mutating func expect(method: HTTPMethod) {
        requestIsHEAD = method == .HEAD
        mustClose = false
        announcedBodyWithheld = false
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
        let (version, code, fields) = try buffer.withUnsafeReadableBytes { bytes throws(HTTP1ParseError) in
            try Self.parse(UnsafeRawBufferPointer(rebasing: bytes[0..<length]))
        }
        // The field lines stay bytes (a slice of what was read, no copy) until something reads them.
        let received = ReceivedFields(bytes: buffer.getSlice(at: buffer.readerIndex + fields.range.lowerBound, length: fields.range.count)!,
                                      lines: fields.lines, connectionNamesFields: fields.key.connection.namesFields, hasDate: fields.date)
        if fields.key.coding, fields.key.length { throw .malformed("the answer has both Content-Length and Transfer-Encoding") }
        let responseHead = ResponseHead(version: version, status: HTTPResponseStatus(statusCode: code), received: received)
        buffer.moveReaderIndex(forwardBy: length)
        // An interim answer (1xx but 101): the final one follows, its own head and body.
        if code < 200 && code != 101 { return .head(responseHead) }
        if !fields.key.connection.keepsAlive(version: version) { mustClose = true }
        if code == 101 || code == 204 || code == 304 || requestIsHEAD {
            // 101: the connection becomes a tunnel, never reused for HTTP.
            if code == 101 { mustClose = true }
            if fields.key.coding || (fields.length ?? 0) > 0 { announcedBodyWithheld = true }
            body = HTTP1BodyReader(.length(0))
        } else {
            body = HTTP1BodyReader(framing(fields))
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

    /// What the decoder reads from a head's fields, in one pass over their bytes.
    struct Fields {
        var key = HTTP1HeadReader.KeyFields()
        /// The Content-Length, every copy the same.
        var length: Int?
        /// The last transfer coding named (of all Transfer-Encoding fields) is chunked.
        var chunkedLast = false
        var date = false
        /// Where the field lines are in the head, and how many.
        var range = 0..<0
        var lines = 0
    }

    private static func parse(_ bytes: UnsafeRawBufferPointer) throws(HTTP1ParseError) -> (HTTPVersion, Int, Fields) {
        var lines = HTTP1HeadReader.Lines(bytes: bytes, bareLF: true)
        guard let first = try lines.next() else { throw .malformed("no status line") }
        let (version, code) = try HTTP1HeadReader.statusLine(bytes, first)
        var fields = Fields()
        let start = lines.position
        while true {
            // `headLength` found the blank line that ends the head.
            guard let line = try lines.next() else { throw .malformed("the head has no end") }
            guard !line.isEmpty else {
                fields.range = start..<line.lowerBound
                break
            }
            let (name, value) = try HTTP1HeadReader.fieldBounds(bytes, line)
            fields.lines += 1
            let nameBytes = UnsafeRawBufferPointer(rebasing: bytes[name]), valueBytes = UnsafeRawBufferPointer(rebasing: bytes[value])
            switch name.count {
            case 14 where nameBytes.isName("content-length"):
                fields.key.length = true
                if let error = HTTP1RequestDecoder.readLength(valueBytes, into: &fields.length) { throw error }
            case 17 where nameBytes.isName("transfer-encoding"):
                fields.key.coding = true
                if let last = Self.lastItem(valueBytes) { fields.chunkedLast = last.isName("chunked") }
            case 10 where nameBytes.isName("connection"):
                fields.key.connection.read(bytes: valueBytes)
            case 4 where nameBytes.isName("date"):
                fields.date = true
            default:
                break
            }
        }
        return (version, code, fields)
    }

    /// The last item of a comma-separated list (RFC 9110 section 5.6.1),
    /// whitespace around it dropped; nil when it has none.
    private static func lastItem(_ bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        var end = bytes.count
        while end > 0 {
            while end > 0, bytes[end - 1] == .space || bytes[end - 1] == .tab || bytes[end - 1] == UInt8(ascii: ",") { end -= 1 }
            var start = end
            while start > 0, bytes[start - 1] != UInt8(ascii: ",") { start -= 1 }
            var first = start
            while first < end, bytes[first] == .space || bytes[first] == .tab { first += 1 }
            if first < end { return UnsafeRawBufferPointer(rebasing: bytes[first..<end]) }
            end = start
        }
        return nil
    }

    private mutating func framing(_ fields: Fields) -> HTTP1BodyReader.Framing {
        guard fields.key.coding else {
            if let length = fields.length { return .length(length) }
            mustClose = true
            return .untilClose
        }
        if fields.chunkedLast { return .chunked }
        mustClose = true
        return .untilClose
    }
}
