import NIOCore

/// Tells HTTP/2 prior knowledge (h2c) from HTTP/1.1 on one port by the
/// connection preface, lets `configure` build the pipeline behind it, passes
/// on the bytes read so far and removes itself.
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
        try configure(context.channel, matches)
        configured = true
        context.fireChannelRead(NIOAny(buffer.readSlice(length: buffer.readableBytes)!))
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        return .needMoreData
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
