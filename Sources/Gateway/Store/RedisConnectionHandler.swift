import NIOCore

/// Why a store command got no reply.
struct StoreFailure: Error, CustomStringConvertible {
    var description: String
}

/// One Redis connection, pipelined: commands go out as they are written,
/// replies come back in the same order and complete them first in, first out.
/// A reply that matches no command, or one hiredis cannot read, closes the
/// connection; every command still waiting then fails.
final class RedisConnectionHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = Request
    typealias OutboundOut = ByteBuffer

    struct Request {
        var bytes: ByteBuffer
        var reply: EventLoopPromise<RedisValue>
    }

    private var waiting = CircularBuffer<EventLoopPromise<RedisValue>>()
    private let reader = RedisReader()

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let request = unwrapOutboundIn(data)
        waiting.append(request.reply)
        context.write(wrapOutboundOut(request.bytes), promise: promise)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = unwrapInboundIn(data)
        do throws(RedisReader.Failure) {
            try bytes.withUnsafeReadableBytes { (raw) throws(RedisReader.Failure) in try reader.feed(raw) }
            while let value = try reader.next() {
                guard let reply = waiting.popFirst() else { throw RedisReader.Failure(description: "a reply to no command") }
                reply.succeed(value)
            }
        } catch {
            failAll(StoreFailure(description: "unreadable reply: \(error)"))
            context.close(promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        failAll(StoreFailure(description: "connection closed"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        failAll(StoreFailure(description: "\(error)"))
        context.close(promise: nil)
    }

    private func failAll(_ failure: StoreFailure) {
        while let reply = waiting.popFirst() { reply.fail(failure) }
    }
}
