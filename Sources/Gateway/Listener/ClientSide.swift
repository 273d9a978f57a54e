import NIOCore
import NIOHTTP1

/// Where a call's answer goes: an HTTP/1.1 connection, or one HTTP/2 stream
/// handled inline on its connection. ProxyHandler speaks only to this, so
/// nothing in the call's logic knows the protocol.
protocol ClientSide: AnyObject {
    var eventLoop: EventLoop { get }
    var allocator: ByteBufferAllocator { get }
    /// Whether the client can take more of the answer now.
    var isWritable: Bool { get }
    var isActive: Bool { get }
    /// The peer's address as text, formatted once per connection.
    var peerAddress: String { get }
    func write(_ part: HTTPServerResponsePart)
    func flush()
    /// Ends the answer and flushes; `close`: the connection (HTTP/1.1) or
    /// the stream (HTTP/2) ends with it.
    func end(close: Bool)
    /// Cuts the connection (HTTP/1.1) or resets the stream (HTTP/2).
    func close()
    /// Pauses or resumes reading the request (backpressure for streamed bodies).
    func setReading(_ on: Bool)
}

/// An HTTP/1.1 connection: the proxy handler's own pipeline position.
final class HTTP1ClientSide: ClientSide {
    let context: ChannelHandlerContext
    private var reading = true

    init(context: ChannelHandlerContext) { self.context = context }

    var eventLoop: EventLoop { context.eventLoop }
    var allocator: ByteBufferAllocator { context.channel.allocator }
    var isWritable: Bool { context.channel.isWritable }
    var isActive: Bool { context.channel.isActive }
    lazy var peerAddress = context.channel.remoteAddress?.ipAddress ?? "unknown"

    func write(_ part: HTTPServerResponsePart) { context.write(NIOAny(part), promise: nil) }
    func flush() { context.flush() }

    func end(close: Bool) {
        guard close else { return context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil)), promise: nil) }
        context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil))).whenComplete { [context] _ in context.close(promise: nil) }
    }

    func close() { context.close(promise: nil) }

    func setReading(_ on: Bool) {
        guard reading != on else { return }
        reading = on
        context.channel.setOption(ChannelOptions.autoRead, value: on).whenComplete { _ in }
    }
}
