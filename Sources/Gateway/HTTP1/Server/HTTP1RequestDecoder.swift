import NIOCore
import NIOHTTP1
import Rewriter

/// Turns a client connection's bytes into request parts, one request at a
/// time: the caller asks for the next part only when it can take it, so
/// pipelined requests wait as unread bytes. Framing is strict (RFC 9112
/// section 6): a request with both Content-Length and Transfer-Encoding,
/// differing lengths, or a coding other than chunked is refused, never
/// guessed at — nothing after such a request can be trusted.
struct HTTP1RequestDecoder {
    private var head: HTTP1HeadReader
    private var body: HTTP1BodyReader?

    /// What the last head read says of its body and connection, noted while
    /// parsing it: the connection acts on these without a copy of the head.
    struct HeadFacts {
        var framing = RequestFraming.none
        var isHEAD = false
        var isHTTP10 = false
        var keepsAlive = true
    }
    private(set) var lastHead = HeadFacts()

    init(maxHeadBytes: Int) { head = HTTP1HeadReader(limit: maxHeadBytes, bareLF: false) }

    /// Between requests: no part of one has been read.
    var isIdle: Bool { body == nil }

    mutating func next(_ buffer: inout ByteBuffer) throws(HTTP1ParseError) -> RequestPart? {
        if var reader = body {
            body = nil
            let part: RequestPart? = try reader.next(&buffer)
            if !reader.isDone { body = reader }
            return part
        }
        // RFC 9112 section 2.2: blank lines before a request line are ignored.
        while let byte = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self), byte == .cr || byte == .lf {
            if byte == .cr {
                guard let next = buffer.getInteger(at: buffer.readerIndex + 1, as: UInt8.self) else { return nil }
                guard next == .lf else { throw .malformed("a line ends in CR without LF") }
                buffer.moveReaderIndex(forwardBy: 2)
            } else {
                throw .malformed("a line ends in LF without CR")
            }
        }
        guard let length = try head.headLength(in: buffer) else { return nil }
        let (requestHead, framing, facts) = try buffer.withUnsafeReadableBytes { bytes throws(HTTP1ParseError) in
            try Self.parse(UnsafeRawBufferPointer(rebasing: bytes[0..<length]))
        }
        buffer.moveReaderIndex(forwardBy: length)
        body = HTTP1BodyReader(framing)
        lastHead = facts
        return .head(requestHead)
    }

    private static func parse(_ bytes: UnsafeRawBufferPointer) throws(HTTP1ParseError) -> (RequestHead, HTTP1BodyReader.Framing, HeadFacts) {
        var lines = HTTP1HeadReader.Lines(bytes: bytes, bareLF: false)
        guard let first = try lines.next() else { throw .malformed("no request line") }
        let (method, target, version) = try HTTP1HeadReader.requestLine(bytes, first)
        let (headers, fields) = try HTTP1HeadReader.fields(bytes, &lines)
        try Self.checkHost(headers, fields, version: version)
        let framing = try Self.framing(headers, fields, version: version)
        let facts = HeadFacts(framing: framing == .chunked ? .streamed : fields.length ? .length(framing.length) : .none,
                              isHEAD: method == .HEAD, isHTTP10: version.minor == 0, keepsAlive: fields.connection.keepsAlive(version: version))
        return (RequestHead(method: method, uri: target, version: version, headers: headers), framing, facts)
    }

    /// RFC 9112 section 3.2: an HTTP/1.1 request has exactly one Host field,
    /// any request at most one, and its value is a host (and port): routing
    /// and the upstream must never read two different ones.
    static func checkHost(_ headers: HeaderList, _ fields: HTTP1HeadReader.KeyFields, version: HTTPVersion) throws(HTTP1ParseError) {
        guard fields.hosts == 1 else {
            if fields.hosts > 1 { throw .malformed("the request has more than one Host field") }
            if version.minor >= 1 { throw .malformed("the HTTP/1.1 request has no Host field") }
            return
        }
        let host = headers["Host"] ?? ""
        // Over the bytes in place: a generic walk of the UTF8View costs ~40 instructions a byte.
        let valid = host.utf8.withContiguousStorageIfAvailable { $0.allSatisfy(\.isHostChar) } ?? host.utf8.allSatisfy(\.isHostChar)
        guard valid else { throw .malformed("the Host field is not a host and port") }
    }

    /// RFC 9112 section 6.3 for requests, refusing what a lenient parser
    /// would have to guess at.
    static func framing(_ headers: HeaderList, _ fields: HTTP1HeadReader.KeyFields, version: HTTPVersion) throws(HTTP1ParseError) -> HTTP1BodyReader.Framing {
        let length = fields.length ? try contentLength(headers) : nil
        guard fields.coding else { return .length(length ?? 0) }
        guard length == nil else { throw .malformed("the request has both Content-Length and Transfer-Encoding") }
        guard version.minor >= 1 else { throw .malformed("Transfer-Encoding in an HTTP/1.0 request") }
        let codings = headers.listItems("Transfer-Encoding")
        for coding in codings where !coding.utf8.elementsEqual("chunked".utf8, by: { $0 | 0x20 == $1 }) {
            throw .unsupportedTransferCoding(String(coding))
        }
        guard codings.count == 1 else { throw .malformed("the request is chunked more than once") }
        return .chunked
    }

    /// Content-Length, when present: digits only, every copy (and every
    /// item of a list) the same.
    static func contentLength(_ headers: HeaderList) throws(HTTP1ParseError) -> Int? {
        var length: Int?
        try headers.forEachValue(named: "Content-Length") { (value: String) throws(HTTP1ParseError) in
            // Over the bytes in place: walking the UTF8View's indices costs ~40 instructions a byte.
            let read = value.utf8.withContiguousStorageIfAvailable { Self.readLength($0, into: &length) }
                ?? Array(value.utf8).withUnsafeBufferPointer { Self.readLength($0, into: &length) }
            if let read { throw read }
        }
        return length
    }

    /// One Content-Length value's items into `length`; what is wrong with them, if anything.
    static func readLength(_ bytes: UnsafeBufferPointer<UInt8>, into length: inout Int?) -> HTTP1ParseError? {
        var i = 0
        while true {
            var item = 0, digits = 0
            while i < bytes.count, bytes[i] == .space || bytes[i] == .tab { i += 1 }
            while i < bytes.count, bytes[i].isDigit, digits < 18 {
                item = item * 10 + Int(bytes[i] - .zero)
                digits += 1
                i += 1
            }
            while i < bytes.count, bytes[i] == .space || bytes[i] == .tab { i += 1 }
            guard digits > 0, i == bytes.count || bytes[i] == UInt8(ascii: ",") else { return .malformed("Content-Length is not a number") }
            guard length == nil || length == item else { return .malformed("the Content-Length values differ") }
            length = item
            if i == bytes.count { return nil }
            i += 1
        }
    }

    static func readLength(_ bytes: UnsafeRawBufferPointer, into length: inout Int?) -> HTTP1ParseError? {
        readLength(UnsafeBufferPointer(start: bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), count: bytes.count), into: &length)
    }
}
