import NIOCore
import NIOHTTP1
import Rewriter

/// HTTP/1.1 written straight into the bytes that go on the wire. A head is
/// measured first and copied in with one capacity check: a write per
/// string, four per field, cost more than the copying.
extension ByteBuffer {
    /// Request line, header fields, the field `framing` calls for, blank line.
    mutating func writeRequestHead(method: String, target: String, headers: HeaderList, framing: RequestFraming = .none) {
        // "<method> <target> HTTP/1.1\r\n" and the closing "\r\n": 1 + 11 + 2.
        var size = method.utf8.count + target.utf8.count + 14
        size += headers.withFields { fields in fields.indices.reduce(0) { $0 + fields[$1].name.utf8.count + fields[$1].value.utf8.count + 4 } }
        switch framing {
        case .none: break
        // "Content-Length: " + digits + "\r\n".
        case .length(let length): size += 18 + Self.decimalDigits(UInt(length))
        // "Transfer-Encoding: chunked\r\n".
        case .streamed: size += 28
        }
        writeWithUnsafeMutableBytes(minimumWritableBytes: size) { raw in
            var out = RawWriter(raw)
            out.put(method)
            out.put(" ")
            out.put(target)
            out.put(" HTTP/1.1\r\n")
            headers.withFields { fields in for i in fields.indices { out.putField(fields[i].name, fields[i].value) } }
            switch framing {
            case .none: break
            case .length(let length):
                out.put("Content-Length: ")
                out.putDecimal(UInt(length))
                out.put("\r\n")
            case .streamed: out.put("Transfer-Encoding: chunked\r\n")
            }
            out.put("\r\n")
            return out.at
        }
    }

    static func decimalDigits(_ value: UInt) -> Int {
        var digits = 1, rest = value / 10
        while rest > 0 {
            digits += 1
            rest /= 10
        }
        return digits
    }

    /// The status line and `headers`, without the blank line (the caller
    /// may add framing fields). Always HTTP/1.1, as RFC 9110 section 6.2
    /// says a server sends its own version, whatever the client's. Returns
    /// whether `headers` hold a Content-Length and a Connection field,
    /// noted while measuring them.
    mutating func writeStatusLine(_ status: HTTPResponseStatus, headers: HeaderList) -> (length: Bool, connection: Bool) {
        var size = Self.statusLineSize(status)
        var has = (length: false, connection: false)
        headers.withFields { fields in
            for i in fields.indices {
                let nameBytes = fields[i].name.utf8.count
                size += nameBytes + fields[i].value.utf8.count + 4
                // Lengths first: a name compared is a name retained.
                if nameBytes == 14, HeaderList.equalNames(fields[i].name, "Content-Length") { has.length = true }
                if nameBytes == 10, HeaderList.equalNames(fields[i].name, "Connection") { has.connection = true }
            }
        }
        writeWithUnsafeMutableBytes(minimumWritableBytes: size) { raw in
            var out = RawWriter(raw)
            out.putStatusLine(status)
            headers.withFields { fields in for i in fields.indices { out.putField(fields[i].name, fields[i].value) } }
            return out.at
        }
        return has
    }

    /// The same for fields still as an upstream sent them: their lines
    /// copied, the forwarding's edits made.
    mutating func writeStatusLine(_ status: HTTPResponseStatus, received: ReceivedFields) -> (length: Bool, connection: Bool) {
        var has = (length: false, connection: false)
        writeWithUnsafeMutableBytes(minimumWritableBytes: Self.statusLineSize(status) + received.maxWrittenSize) { raw in
            var out = RawWriter(raw)
            out.putStatusLine(status)
            has = received.write(to: &out)
            return out.at
        }
        return has
    }

    /// A response head's status line and fields, whichever form they are in.
    mutating func writeStatusLine(_ head: ResponseHead) -> (length: Bool, connection: Bool) {
        if let received = head.received { return writeStatusLine(head.status, received: received) }
        return writeStatusLine(head.status, headers: head.headers)
    }

    /// "HTTP/1.1 " + 3 digits + " " + reason + "\r\n".
    static func statusLineSize(_ status: HTTPResponseStatus) -> Int { status.reasonPhrase.utf8.count + 15 }

    /// A chunk's size line (RFC 9112 section 7.1).
    mutating func writeChunkSize(_ size: Int) {
        writeString(String(size, radix: 16))
        writeStaticString("\r\n")
    }

    /// Takes in newly received bytes: the first read is kept as it is (no
    /// copy); only a message split across reads is joined.
    mutating func cumulate(_ incoming: ByteBuffer) {
        if readableBytes == 0 {
            self = incoming
        } else {
            var incoming = incoming
            writeBuffer(&incoming)
        }
    }
}

extension RawWriter {
    mutating func putStatusLine(_ status: HTTPResponseStatus) {
        let code = Int(status.code)
        put("HTTP/1.1 ")
        put(UInt8.zero + UInt8(code / 100 % 10))
        put(UInt8.zero + UInt8(code / 10 % 10))
        put(UInt8.zero + UInt8(code % 10))
        put(" ")
        put(status.reasonPhrase)
        put("\r\n")
    }
}

/// A connection's output buffer, reused once the channel has written it: a
/// fresh one per head costs two allocations. Small ones only are kept, so
/// an idle connection holds at most `maxKept` bytes.
struct ReusableBuffer {
    private var last: ByteBuffer?
    static let maxKept = 2048

    /// An empty buffer with room for `capacity` bytes.
    mutating func take(_ allocator: ByteBufferAllocator, capacity: Int) -> ByteBuffer {
        guard var buffer = last else { return allocator.buffer(capacity: capacity) }
        last = nil
        // Allocates only when the channel still holds it.
        buffer.clear(minimumCapacity: capacity)
        return buffer
    }

    /// `buffer` goes to the channel and is reused when it comes back unshared.
    mutating func keep(_ buffer: ByteBuffer) {
        if buffer.capacity <= Self.maxKept { last = buffer }
    }
}
