import NIOCore
import Rewriter

/// Tells HTTP/2 prior knowledge (h2c) from HTTP/1.1 on one port, lets
/// `configure` build the pipeline behind it, passes on the bytes read so far
/// and removes itself. HTTP/1 is what opens with a line shaped as a request
/// line, `METHOD SP target SP NAME/x.y`, after any blank lines (RFC 9112
/// section 2.2: HTTP/1's reader skips them): HTTP/1's reader answers it, a
/// version it does not speak with 505. Anything else (the preface, or bytes
/// that only begin like it, or no request line at all) goes to HTTP/2,
/// whose handler answers a wrong preface with GOAWAY(PROTOCOL_ERROR)
/// instead of an HTTP/1.1 error an HTTP/2 peer cannot read (h2spec 3.5).
final class HTTPVersionDetector: ByteToMessageDecoder {
    typealias InboundOut = ByteBuffer

    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    private let configure: @Sendable (Channel, _ isHTTP2: Bool) throws -> Void
    private var configured = false

    init(configure: @escaping @Sendable (Channel, _ isHTTP2: Bool) throws -> Void) { self.configure = configure }

    func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        if configured {
            // Bytes that arrived while the removal was pending.
            context.fireChannelRead(NIOAny(buffer.readSlice(length: buffer.readableBytes)!))
            return .needMoreData
        }
        let available = min(buffer.readableBytes, Self.preface.count)
        guard let bytes = buffer.getBytes(at: buffer.readerIndex, length: available) else { return .needMoreData }
        let matches = bytes.elementsEqual(Self.preface.prefix(available))
        if matches && available < Self.preface.count { return .needMoreData }
        let http2: Bool
        if matches {
            http2 = true
        } else if let isHTTP1 = Self.opensWithHTTP1RequestLine(buffer) {
            http2 = !isHTTP1
        } else {
            return .needMoreData
        }
        try configure(context.channel, http2)
        configured = true
        context.fireChannelRead(NIOAny(buffer.readSlice(length: buffer.readableBytes)!))
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        return .needMoreData
    }

    /// The longest request line waited for: past it, HTTP/1's reader refuses the head.
    static let maxLineBytes = 16 * 1024

    /// Whether the first line that is not blank is shaped as a request line
    /// (`METHOD SP target SP NAME/x.y`, any name and version); nil while it is incomplete.
    static func opensWithHTTP1RequestLine(_ buffer: ByteBuffer) -> Bool? {
        var view = buffer.readableBytesView.prefix(maxLineBytes)
        while view.starts(with: "\r\n".utf8) { view = view.dropFirst(2) }
        guard let lineFeed = view.firstIndex(of: UInt8(ascii: "\n")) else {
            return buffer.readableBytes >= maxLineBytes ? true : nil
        }
        var line = view[..<lineFeed]
        if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
        // The preface's own first line is HTTP/2's, whatever follows it.
        if line.elementsEqual("PRI * HTTP/2.0".utf8) { return false }
        let parts = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy(HeaderList.isTokenByte),
              !parts[1].isEmpty, parts[1].allSatisfy({ $0 > 0x20 && $0 != 0x7F }) else { return false }
        // NAME "/" DIGIT "." DIGIT
        let version = parts[2]
        guard version.count >= 5, let slash = version.firstIndex(of: UInt8(ascii: "/")), slash > version.startIndex,
              version[..<slash].allSatisfy({ (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) }) else { return false }
        let number = Array(version[version.index(after: slash)...])
        let isDigit = { (byte: UInt8) in byte >= 0x30 && byte <= 0x39 }
        return number.count == 3 && isDigit(number[0]) && number[1] == UInt8(ascii: ".") && isDigit(number[2])
    }

    /// Called while the removal completes: bytes still buffered belong to the
    /// protocol handlers now behind this one.
    func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        if configured, buffer.readableBytes > 0 {
            context.fireChannelRead(NIOAny(buffer.readSlice(length: buffer.readableBytes)!))
        }
        return .needMoreData
    }
}
