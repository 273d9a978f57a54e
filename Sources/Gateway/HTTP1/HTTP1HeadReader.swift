import Glibc
import NIOCore
import NIOHTTP1
import Rewriter

/// Finds and reads one message head (start line and header fields, RFC 9112
/// sections 3-5) in a connection's received bytes. Strict where leniency
/// lets two parsers disagree about where a message ends: field names are
/// tokens with no space before the colon, no obsolete line folding, no
/// control characters in values. `bareLF` accepts LF alone as a line end
/// (RFC 9112 section 2.2 allows it; legacy upstreams send it).
struct HTTP1HeadReader {
    let limit: Int
    let bareLF: Bool
    /// Bytes already searched for the head's end: a head arriving in many
    /// reads is scanned once, not once per read.
    private var scanned = 0

    init(limit: Int, bareLF: Bool) {
        self.limit = limit
        self.bareLF = bareLF
    }

    /// The length of the head at the buffer's start, blank line included,
    /// once all of it arrived.
    mutating func headLength(in buffer: ByteBuffer) throws(HTTP1ParseError) -> Int? {
        let found: Int? = buffer.withUnsafeReadableBytes { bytes in
            var i = scanned
            while let lf = Self.lineFeed(in: bytes, from: i) {
                if lf + 1 < bytes.count, bytes[lf + 1] == .lf { return lf + 2 }
                if lf + 2 < bytes.count, bytes[lf + 1] == .cr, bytes[lf + 2] == .lf { return lf + 3 }
                if lf + 2 >= bytes.count {
                    // Too few bytes after this line end to tell: look again from here.
                    scanned = lf
                    return nil
                }
                i = lf + 1
            }
            scanned = bytes.count
            return nil
        }
        if let found {
            scanned = 0
            if found > limit { throw .headTooLarge(limit: limit) }
            return found
        }
        if buffer.readableBytes > limit { throw .headTooLarge(limit: limit) }
        return nil
    }

    /// The first LF at or after `start`. `memchr` (libc's vectorized scan)
    /// instead of a loop over the bytes: that loop costs ~6 instructions a byte,
    /// a third of parsing a head.
    static func lineFeed(in bytes: UnsafeRawBufferPointer, from start: Int) -> Int? {
        guard start < bytes.count, let base = bytes.baseAddress,
            let found = memchr(base + start, Int32(UInt8.lf), bytes.count - start)
        else { return nil }
        return base.distance(to: UnsafeRawPointer(found))
    }

    /// The lines of a head, each without its line ending.
    struct Lines {
        let bytes: UnsafeRawBufferPointer
        let bareLF: Bool
        var position = 0

        mutating func next() throws(HTTP1ParseError) -> Range<Int>? {
            guard position < bytes.count else { return nil }
            // A head as `headLength` found it ends in LF; anything else is not one.
            guard let end = HTTP1HeadReader.lineFeed(in: bytes, from: position) else { throw .malformed("a line has no end") }
            let start = position
            position = end + 1
            if end > start, bytes[end - 1] == .cr { return start..<(end - 1) }
            if !bareLF { throw .malformed("a line ends in LF without CR") }
            return start..<end
        }
    }

    /// A request line: method, origin-form or other target, version.
    static func requestLine(_ bytes: UnsafeRawBufferPointer, _ line: Range<Int>) throws(HTTP1ParseError) -> (HTTPMethod, String, HTTPVersion) {
        var i = line.lowerBound
        while i < line.upperBound, bytes[i].isTokenChar { i += 1 }
        guard i > line.lowerBound, i < line.upperBound, bytes[i] == .space else {
            throw .malformed("the request line does not start with a method and a space")
        }
        let method = HTTPMethod(bytes[line.lowerBound..<i])
        i += 1
        let targetStart = i
        while i < line.upperBound, bytes[i] > .space, bytes[i] < 0x7F { i += 1 }
        guard i > targetStart, i < line.upperBound, bytes[i] == .space else {
            throw .malformed("the request target is missing or holds a byte outside visible ASCII")
        }
        let target = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[targetStart..<i]), as: UTF8.self)
        let version = try Self.version(bytes, (i + 1)..<line.upperBound)
        return (method, target, version)
    }

    /// A status line: version, status code; the reason phrase is not kept
    /// (answers carry the code's standard one, as HTTP/2 carries none).
    static func statusLine(_ bytes: UnsafeRawBufferPointer, _ line: Range<Int>) throws(HTTP1ParseError) -> (HTTPVersion, Int) {
        guard line.count >= 12, bytes[line.lowerBound + 8] == .space else { throw .malformed("the status line is not HTTP/x.y and a code") }
        let version = try Self.version(bytes, line.lowerBound..<(line.lowerBound + 8))
        var code = 0
        for i in (line.lowerBound + 9)..<(line.lowerBound + 12) {
            guard bytes[i].isDigit else { throw .malformed("the status code is not three digits") }
            code = code * 10 + Int(bytes[i] - .zero)
        }
        guard code >= 100, line.count == 12 || bytes[line.lowerBound + 12] == .space else {
            throw .malformed("the status code is not three digits")
        }
        return (version, code)
    }

    /// "HTTP/" DIGIT "." DIGIT, major version 1.
    static func version(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) throws(HTTP1ParseError) -> HTTPVersion {
        let s = range.lowerBound
        guard range.count == 8, bytes[s] == UInt8(ascii: "H"), bytes[s + 1] == UInt8(ascii: "T"), bytes[s + 2] == UInt8(ascii: "T"),
            bytes[s + 3] == UInt8(ascii: "P"), bytes[s + 4] == UInt8(ascii: "/"), bytes[s + 5].isDigit,
            bytes[s + 6] == UInt8(ascii: "."), bytes[s + 7].isDigit
        else { throw .malformed("the protocol version is not HTTP/x.y") }
        let major = Int(bytes[s + 5] - .zero), minor = Int(bytes[s + 7] - .zero)
        guard major == 1 else { throw .unsupportedVersion("HTTP/\(major).\(minor)") }
        return HTTPVersion(major: major, minor: minor)
    }

    /// The fields the decoders check, noted while parsing: most heads hold
    /// one Host and no framing field, and need no second look.
    struct KeyFields {
        var length = false
        var coding = false
        var hosts = 0
        var connection = ConnectionOptions()
    }

    /// The header fields up to the blank line.
    static func fields(_ bytes: UnsafeRawBufferPointer, _ lines: inout Lines) throws(HTTP1ParseError) -> (HeaderList, KeyFields) {
        var fields: [HeaderList.Field] = []
        // Room for the forwarding fields the gateway adds: no regrowth per call.
        fields.reserveCapacity(24)
        var key = KeyFields()
        while let line = try lines.next(), !line.isEmpty {
            let field = try Self.field(bytes, line)
            // The name's bytes (a token, so one byte a character), compared in place.
            let name = UnsafeRawBufferPointer(rebasing: bytes[line.lowerBound..<(line.lowerBound + field.0.utf8.count)])
            switch name.count {
            case 4 where name.isName("host"): key.hosts += 1
            case 14 where name.isName("content-length"): key.length = true
            case 17 where name.isName("transfer-encoding"): key.coding = true
            case 10 where name.isName("connection"): key.connection.read(field.1)
            default: break
            }
            fields.append(HeaderList.Field(name: field.0, value: field.1))
        }
        return (HeaderList(fields), key)
    }

    /// One header field line: `name: value`, optional whitespace around the value.
    static func field(_ bytes: UnsafeRawBufferPointer, _ line: Range<Int>) throws(HTTP1ParseError) -> (String, String) {
        // Valid UTF-8 (checked), so decoding repairs nothing.
        let (name, value) = try fieldBounds(bytes, line)
        return (String(decoding: UnsafeRawBufferPointer(rebasing: bytes[name]), as: UTF8.self),
                String(decoding: UnsafeRawBufferPointer(rebasing: bytes[value]), as: UTF8.self))
    }

    /// Where one header field line's name and value are (the value without
    /// the whitespace around it), checked as `field` reads them.
    static func fieldBounds(_ bytes: UnsafeRawBufferPointer, _ line: Range<Int>) throws(HTTP1ParseError) -> (name: Range<Int>, value: Range<Int>) {
        var i = line.lowerBound
        while i < line.upperBound, bytes[i].isTokenChar { i += 1 }
        guard i < line.upperBound, bytes[i] == .colon else {
            if i == line.lowerBound, bytes[i] == .space || bytes[i] == .tab {
                throw .malformed("a header line is folded (obsolete line folding)")
            }
            throw .malformed("a header field name is not a token followed by a colon")
        }
        guard i > line.lowerBound else { throw .malformed("a header field has no name") }
        let name = line.lowerBound..<i
        i += 1
        while i < line.upperBound, bytes[i] == .space || bytes[i] == .tab { i += 1 }
        var end = line.upperBound
        while end > i, bytes[end - 1] == .space || bytes[end - 1] == .tab { end -= 1 }
        guard let ascii = Self.valueBytes(UnsafeRawBufferPointer(rebasing: bytes[i..<end])) else {
            throw .malformed("header field \(String(decoding: UnsafeRawBufferPointer(rebasing: bytes[name]), as: UTF8.self)) holds a control character")
        }
        // Repairing it would change the bytes on their way on.
        if !ascii, String(validating: UnsafeRawBufferPointer(rebasing: bytes[i..<end]), as: UTF8.self) == nil {
            throw .malformed("header field \(String(decoding: UnsafeRawBufferPointer(rebasing: bytes[name]), as: UTF8.self)) is not valid UTF-8")
        }
        return (name, i..<end)
    }

    /// Whether a field value is all ASCII; nil when it holds a control
    /// character other than HTAB, or DEL. Eight bytes at a time while none
    /// is suspect (hand-written: a byte loop costs ~16 instructions a byte,
    /// the most of reading a head, under callgrind).
    static func valueBytes(_ value: UnsafeRawBufferPointer) -> Bool? {
        let high: UInt64 = 0x8080_8080_8080_8080, ones: UInt64 = 0x0101_0101_0101_0101
        var ascii = true, i = 0
        while i + 8 <= value.count {
            let word = value.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            // A byte at or over 0x80, under 0x20, or equal to 0x7F sets its
            // high bit here (and maybe others'): those words go byte by byte.
            let del = word ^ (0x7F &* ones)
            if (word | (word &- 0x20 &* ones) & ~word | (del &- ones) & ~del) & high != 0 { break }
            i += 8
        }
        while i < value.count {
            let byte = value[i]
            if byte >= 0x80 {
                ascii = false
            } else if byte < .space && byte != .tab || byte == 0x7F {
                return nil
            }
            i += 1
        }
        return ascii
    }
}

extension UnsafeRawBufferPointer {
    /// Whether these token bytes spell `lower` (lower-case letters and `-`),
    /// ASCII case folded: a token byte folds to a letter only from that letter's
    /// two cases, and to `-` only from `-`.
    func isName(_ lower: StaticString) -> Bool {
        guard count == lower.utf8CodeUnitCount else { return false }
        let expected = lower.utf8Start
        for i in 0..<count where self[i] | 0x20 != expected[i] { return false }
        return true
    }
}

extension HTTPMethod {
    /// The common methods without building a string first.
    init(_ bytes: Slice<UnsafeRawBufferPointer>) {
        // Byte compares: `elementsEqual` over the slice and a UTF8View costs ~200 instructions.
        let raw = UnsafeRawBufferPointer(rebasing: bytes)
        switch raw.count {
        case 3 where raw[0] == UInt8(ascii: "G") && raw[1] == UInt8(ascii: "E") && raw[2] == UInt8(ascii: "T"): self = .GET
        case 4 where raw[0] == UInt8(ascii: "P") && raw[1] == UInt8(ascii: "O") && raw[2] == UInt8(ascii: "S") && raw[3] == UInt8(ascii: "T"):
            self = .POST
        default: self.init(rawValue: String(decoding: raw, as: UTF8.self))
        }
    }
}

extension UInt8 {
    static let lf = UInt8(ascii: "\n")
    static let cr = UInt8(ascii: "\r")
    static let space = UInt8(ascii: " ")
    static let tab = UInt8(ascii: "\t")
    static let colon = UInt8(ascii: ":")
    static let zero = UInt8(ascii: "0")

    var isDigit: Bool { self >= .zero && self <= UInt8(ascii: "9") }

    /// What an RFC 3986 host and port are made of (reg-name, IP literals, `:`).
    var isHostChar: Bool {
        switch self {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "%"), UInt8(ascii: "!"),
            UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "*"),
            UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="), UInt8(ascii: ":"), UInt8(ascii: "["),
            UInt8(ascii: "]"):
            true
        default: false
        }
    }

    /// tchar (RFC 9110 section 5.6.2), from a bitmap of the 128 ASCII
    /// bytes: a switch over the classes cost ~10 branches a byte.
    var isTokenChar: Bool {
        // Masking shifts (`&>>`): the range is checked here, not again per shift.
        self < 64 ? (0x03FF_6CFA_0000_0000 as UInt64) &>> UInt64(self) & 1 == 1 : self < 128 && (0x57FF_FFFF_C7FF_FFFE as UInt64) &>> UInt64(self - 64) & 1 == 1
    }
}
