import NIOCore

/// Put right after the socket of an HTTP/2 connection: the flushes of all its
/// streams in one event-loop tick (each answer that ended while the loop
/// handled upstream reads) become one write, as HAProxy and nghttpx batch
/// frames, instead of one syscall per stream.
final class DeferredFlushHandler: ChannelOutboundHandler {
    typealias OutboundIn = Any
    private var flushPending = false

    func flush(context: ChannelHandlerContext) {
        guard !flushPending else { return }
        flushPending = true
        // Tasks run after the tick's I/O events: every stream has written by then.
        context.eventLoop.assumeIsolated().execute {
            guard self.flushPending else { return }
            self.flushPending = false
            context.flush()
        }
    }

    /// A close (GOAWAY done, connection idle) must not drop frames still
    /// waiting for the deferred flush.
    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if flushPending {
            flushPending = false
            context.flush()
        }
        context.close(mode: mode, promise: promise)
    }
}
