import Glibc
import NIOCore
import Rewriter

/// A response head's fields as an HTTP/1.1 upstream sent them (checked by
/// HTTP1ResponseDecoder), with the forwarding's edits kept beside the
/// bytes: the usual answer goes back out with its field lines copied, never
/// made into strings (reading them into a list and writing it out again was
/// a fifth of a call's instructions). Anything that reads the fields gets
/// the list the same edits would have made (`list`).
struct ReceivedFields: Sendable {
    /// The field lines, each ending in LF or CRLF, without the blank line.
    let bytes: ByteBuffer
    let lines: Int
    /// A received `Connection` field names other fields (hop-by-hop too).
    let connectionNamesFields: Bool
    /// A `Date` field is among them.
    let hasDate: Bool
    /// The hop-by-hop fields are dropped.
    private(set) var hopByHopDropped = false
    /// Fields the gateway set: each takes the place of the first (kept)
    /// received field of its name and drops the others, as `HeaderList.set`.
    private(set) var replacements = HeaderList()

    init(bytes: ByteBuffer, lines: Int, connectionNamesFields: Bool, hasDate: Bool) {
        self.bytes = bytes
        self.lines = lines
        self.connectionNamesFields = connectionNamesFields
        self.hasDate = hasDate
    }

    /// `HeaderList.removeHopByHop`; false when it cannot be kept beside the
    /// bytes (a Connection field names other fields, or fields were set first).
    mutating func dropHopByHop() -> Bool {
        guard !connectionNamesFields, replacements.isEmpty else { return false }
        hopByHopDropped = true
        return true
    }

    /// `HeaderList.set`; false past 64 replacements (what `write` tracks).
    mutating func set(_ name: String, _ value: String) -> Bool {
        guard replacements.count < 64 else { return false }
        replacements.set(name, value)
        return true
    }

    /// The fields as a list, with the edits made to it in the same order.
    var list: HeaderList {
        var fields: [HeaderList.Field] = []
        fields.reserveCapacity(lines + replacements.count)
        forEachField { name, value in
            fields.append(HeaderList.Field(name: String(decoding: name, as: UTF8.self), value: String(decoding: value, as: UTF8.self)))
        }
        // Moved: a list sharing the array would copy it at its first edit.
        var list = HeaderList(consume fields)
        if hopByHopDropped { list.removeHopByHop() }
        replacements.withFields { for i in $0.indices { list.set($0[i].name, $0[i].value) } }
        return list
    }

    /// At most this many bytes go out: a line gains at most a space after
    /// its colon and a CR before its LF.
    var maxWrittenSize: Int {
        bytes.readableBytes + 2 * lines + replacements.withFields { $0.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 } }
    }

    /// Writes the fields as HTTP/1.1 lines, edits made; whether a
    /// Content-Length and a Connection field went out.
    func write(to out: inout RawWriter) -> (length: Bool, connection: Bool) {
        var has = (length: false, connection: false)
        var placed: UInt64 = 0
        func note(_ name: UnsafeRawBufferPointer) {
            if name.count == 14, name.isName("content-length") { has.length = true }
            if name.count == 10, name.isName("connection") { has.connection = true }
        }
        replacements.withFields { replacements in
            forEachField { name, value in
                if hopByHopDropped, name.isHopByHopName { return }
                if let i = Self.index(of: name, in: replacements) {
                    guard placed & 1 << i == 0 else { return }
                    placed |= 1 << i
                    note(name)
                    return out.putField(replacements[i].name, replacements[i].value)
                }
                note(name)
                out.putField(name, value)
            }
            for i in replacements.indices where placed & 1 << i == 0 {
                replacements[i].name.utf8.withContiguousStorageIfAvailable { note(UnsafeRawBufferPointer($0)) }
                out.putField(replacements[i].name, replacements[i].value)
            }
        }
        return has
    }

    /// Each field's name and value (without the whitespace around it), in
    /// order. The lines were checked when read: a colon ends each name.
    private func forEachField(_ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Void) {
        bytes.withUnsafeReadableBytes { raw in
            var lines = HTTP1HeadReader.Lines(bytes: raw, bareLF: true)
            while let line = try? lines.next() {
                guard let found = memchr(raw.baseAddress! + line.lowerBound, Int32(UInt8.colon), line.count) else { continue }
                let colon = raw.baseAddress!.distance(to: UnsafeRawPointer(found))
                var start = colon + 1, end = line.upperBound
                while start < end, raw[start] == .space || raw[start] == .tab { start += 1 }
                while end > start, raw[end - 1] == .space || raw[end - 1] == .tab { end -= 1 }
                body(UnsafeRawBufferPointer(rebasing: raw[line.lowerBound..<colon]), UnsafeRawBufferPointer(rebasing: raw[start..<end]))
            }
        }
    }

    /// The first of `fields` named `name`, lengths compared first (no string is made).
    private static func index(of name: UnsafeRawBufferPointer, in fields: UnsafeBufferPointer<HeaderList.Field>) -> Int? {
        for i in fields.indices where fields[i].name.utf8.count == name.count {
            let equal = fields[i].name.utf8.withContiguousStorageIfAvailable { other in
                name.indices.allSatisfy { HeaderList.sameLetter(name[$0], other[$0]) }
            } ?? HeaderList.equalNames(String(decoding: name, as: UTF8.self), fields[i].name)
            if equal { return i }
        }
        return nil
    }
}

extension UnsafeRawBufferPointer {
    /// A hop-by-hop field's name (RFC 9110 section 7.6.1; RFC 9113's
    /// HTTP2-Settings), any case. A switch over literals: a static array
    /// cost a retain per name compared.
    var isHopByHopName: Bool {
        switch count {
        case 2: isName("te")
        case 7: isName("upgrade") || isName("trailer")
        case 10: isName("connection") || isName("keep-alive")
        case 14: isName("http2-settings")
        case 16: isName("proxy-connection")
        case 17: isName("transfer-encoding")
        case 18: isName("proxy-authenticate")
        case 19: isName("proxy-authorization")
        default: false
        }
    }
}
