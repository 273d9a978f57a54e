import NIOCore

/// The listener's context as one event loop uses it: that loop's upstream
/// pool and its access-log and span buffers, each found on first use (a
/// lookup hashes into a dictionary) and kept while the context is current.
struct LoopContext {
    private(set) var listener: ListenerContext
    let eventLoop: any EventLoop
    private var loopPool: UpstreamPool?
    private var loopLogBuffer: AccessLog.Buffer?
    private var loopSpanBuffer: SpanExporter.Buffer?
    private var loopFilters: LoopFilters?

    init(_ listener: ListenerContext, eventLoop: any EventLoop) {
        self.listener = listener
        self.eventLoop = eventLoop
    }

    /// The slot's context as of a new request head: a reload may have
    /// swapped it, and the loop's handles go with the old one.
    mutating func update(_ context: ListenerContext) {
        guard context !== listener else { return }
        self = LoopContext(context, eventLoop: eventLoop)
    }

    var pool: UpstreamPool {
        mutating get {
            if let loopPool { return loopPool }
            let pool = listener.pools.pool(for: eventLoop)
            loopPool = pool
            return pool
        }
    }

    var logBuffer: AccessLog.Buffer? {
        mutating get {
            guard let accessLog = listener.accessLog else { return nil }
            if let loopLogBuffer { return loopLogBuffer }
            let buffer = accessLog.buffer(for: eventLoop)
            loopLogBuffer = buffer
            return buffer
        }
    }

    /// This loop's filter VMs (nil: no filters are configured).
    var filters: LoopFilters? {
        mutating get {
            if let loopFilters { return loopFilters }
            loopFilters = listener.filters?.host(for: eventLoop)
            return loopFilters
        }
    }

    /// Where this loop's spans go (nil: spans are not exported).
    var spanSink: SpanSink? {
        mutating get {
            guard let exporter = listener.spans else { return nil }
            if let loopSpanBuffer { return SpanSink(exporter: exporter, buffer: loopSpanBuffer) }
            let buffer = exporter.buffer(for: eventLoop)
            loopSpanBuffer = buffer
            return SpanSink(exporter: exporter, buffer: buffer)
        }
    }
}
