import NIOCore
import NIOEmbedded
import Testing
@testable import Gateway

/// The HTTP/2 connection's flush coalescing, byte for byte on an EmbeddedChannel.
@Suite struct DeferredFlushHandlerTests {
    private func channel() throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(DeferredFlushHandler())
        return channel
    }

    private func write(_ text: String, to channel: EmbeddedChannel) {
        channel.writeAndFlush(channel.allocator.buffer(string: text), promise: nil)
    }

    @Test func flushesOfOneTickBecomeOne() throws {
        let channel = try channel()
        write("a", to: channel)
        write("b", to: channel)
        // Nothing reaches the socket until the loop runs its tasks...
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        channel.embeddedEventLoop.run()
        // ...then both writes go out together.
        #expect(try channel.readOutbound(as: ByteBuffer.self).map { String(buffer: $0) } == "a")
        #expect(try channel.readOutbound(as: ByteBuffer.self).map { String(buffer: $0) } == "b")
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        _ = try channel.finish()
    }

    @Test func aCloseFlushesWhatWaits() throws {
        let channel = try channel()
        var written: [String] = []
        try channel.pipeline.syncOperations.addHandler(OutboundRecorder { written.append($0) }, position: .first)
        write("last frames", to: channel)
        #expect(written.isEmpty)
        // The socket side gets the bytes before the close, not never.
        channel.close(promise: nil)
        #expect(written == ["last frames"])
        channel.embeddedEventLoop.run()
    }

    /// Records what is flushed towards the socket.
    private final class OutboundRecorder: ChannelOutboundHandler {
        typealias OutboundIn = ByteBuffer
        let record: (String) -> Void
        private var pending: [String] = []
        init(_ record: @escaping (String) -> Void) { self.record = record }
        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            pending.append(String(buffer: unwrapOutboundIn(data)))
            context.write(data, promise: promise)
        }
        func flush(context: ChannelHandlerContext) {
            pending.forEach(record)
            pending = []
            context.flush()
        }
    }
}
