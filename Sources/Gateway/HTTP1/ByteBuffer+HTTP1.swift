import NIOCore
import NIOHTTP1
import Rewriter

/// HTTP/1.1 written straight into the bytes that go on the wire.
extension ByteBuffer {
    /// Request line and header fields, blank line included.
    mutating func writeRequestHead(method: String, target: String, headers: HeaderList) {
        writeString(method)
        writeInteger(UInt8.space)
        writeString(target)
        writeStaticString(" HTTP/1.1\r\n")
        for field in headers { writeField(field.name, field.value) }
        writeStaticString("\r\n")
    }

    /// The status line. Always HTTP/1.1, as RFC 9110 section 6.2 says a
    /// server sends its own version, whatever the client's.
    mutating func writeStatusLine(_ status: HTTPResponseStatus) {
        let code = Int(status.code)
        writeStaticString("HTTP/1.1 ")
        writeInteger(UInt8.zero + UInt8(code / 100 % 10))
        writeInteger(UInt8.zero + UInt8(code / 10 % 10))
        writeInteger(UInt8.zero + UInt8(code % 10))
        writeInteger(UInt8.space)
        writeString(status.reasonPhrase)
        writeStaticString("\r\n")
    }

    mutating func writeField(_ name: String, _ value: String) {
        writeString(name)
        writeStaticString(": ")
        writeString(value)
        writeStaticString("\r\n")
    }

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
