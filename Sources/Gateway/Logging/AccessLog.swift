import NIOCore
import W3CTraceContext

/// The data path's access log: one line per call, written into its event
/// loop's own buffer in the configured format (`AccessLine`), and handed to
/// the sink when the buffer passes `flushBytes` or `flushInterval` after its
/// first line (nginx's `buffer=` and `flush=`), and on drain and shutdown.
/// The operational logs stay on swift-log.
final class AccessLog: Sendable {
    /// What one call's line says; filled in as the call goes.
    struct Entry {
        var start = NIODeadline.now()
        var client = "-"
        /// `HTTP/1.1`, `HTTP/1.0`, `h2c` or `h2`.
        var proto = "-"
        var method = ""
        var target = ""
        var userAgent: String?
        var route = "-"
        var upstream: String?
        /// The address the last try's connection went to.
        var upstreamAddress: String?
        var upstreamStatus: Int?
        /// When the last try's request went out, and its response head came.
        var sentAt: NIODeadline?
        var firstByte: TimeAmount?
        var tries = 0
        var bytes = 0
        var requestID = "-"
        /// The W3C trace id the call carried upstream, when tracing is on.
        var traceID: TraceID?
        /// A tunnel's bytes from the client (its bytes to the client are `bytes`).
        var requestBytes: Int?
        /// Why the last try failed, in full (never shown to the client).
        var reason: String?
        /// What the route's cache did: hit, miss, stale, revalidated, collapsed, bypass (nil: the route has no cache).
        var cache: String?

        /// The text values' bytes together, which bound the line's size.
        var textBytes: Int {
            var count = client.utf8.count + proto.utf8.count + method.utf8.count + target.utf8.count + route.utf8.count
            count += requestID.utf8.count + (upstream?.utf8.count ?? 0) + (upstreamAddress?.utf8.count ?? 0)
            return count + (traceID == nil ? 0 : 32) + (userAgent?.utf8.count ?? 0) + (reason?.utf8.count ?? 0) + (cache?.utf8.count ?? 0)
        }

        /// The trace id as the log and problems show it.
        var traceHex: String? { traceID.map { CallTrace.hex($0.bytes) } }
    }

    /// nginx's `buffer=64k`.
    static let flushBytes = 64 * 1024
    static let flushInterval = TimeAmount.milliseconds(100)

    let format: AccessLine.Format
    let sink: AccessLogSink
    private let buffers: [ObjectIdentifier: Buffer]

    /// One event loop's lines not yet written; touched on that loop only.
    final class Buffer: @unchecked Sendable {
        fileprivate let eventLoop: EventLoop
        fileprivate var bytes = Buffer.empty()
        fileprivate var clock = AccessLine.Clock()
        fileprivate var flushScheduled = false

        fileprivate init(eventLoop: EventLoop) { self.eventLoop = eventLoop }

        private static func empty() -> ByteBuffer { ByteBufferAllocator().buffer(capacity: AccessLog.flushBytes + 8192) }

        /// Empty, at its usual size again after a huge line grew it.
        fileprivate func fresh() {
            if bytes.capacity > 4 * AccessLog.flushBytes { bytes = Self.empty() } else { bytes.clear() }
        }
    }

    init(group: any EventLoopGroup, format: AccessLine.Format, sink: AccessLogSink) {
        self.format = format
        self.sink = sink
        var buffers: [ObjectIdentifier: Buffer] = [:]
        for loop in group.makeIterator() { buffers[ObjectIdentifier(loop)] = Buffer(eventLoop: loop) }
        self.buffers = buffers
    }

    /// `eventLoop`'s buffer: the one its calls' lines go to.
    func buffer(for eventLoop: EventLoop) -> Buffer { buffers[ObjectIdentifier(eventLoop)]! }

    /// On `buffer`'s event loop, the one the call ran on.
    func record(_ entry: Entry, status: Int, outcome: String, into buffer: Buffer, now: NIODeadline) {
        buffer.bytes.writeWithUnsafeMutableBytes(minimumWritableBytes: AccessLine.room(textBytes: entry.textBytes + outcome.utf8.count)) {
            var line = AccessLine(format, into: $0, clock: &buffer.clock, now: now)
            line.field("client", entry.client)
            line.field("proto", entry.proto)
            line.field("method", entry.method)
            line.field("target", entry.target)
            line.field("route", entry.route)
            line.field("upstream", entry.upstream)
            line.field("upstream_addr", entry.upstreamAddress)
            line.field("status", status)
            line.field("upstream_status", entry.upstreamStatus)
            line.field("bytes", entry.bytes)
            if let requestBytes = entry.requestBytes { line.field("request_bytes", requestBytes) }
            line.field("duration_ms", millis: (now - entry.start).nanoseconds)
            line.field("upstream_ttfb_ms", millis: entry.firstByte?.nanoseconds)
            line.field("tries", entry.tries)
            if let cache = entry.cache { line.field("cache", cache) }
            line.field("request_id", entry.requestID)
            line.field("trace_id", entry.traceHex)
            line.field("outcome", outcome)
            line.field("user_agent", entry.userAgent)
            if let reason = entry.reason { line.field("reason", reason) }
            return line.finish()
        }
        if buffer.bytes.readableBytes >= Self.flushBytes {
            flush(buffer)
        } else if !buffer.flushScheduled {
            // One timer at a time: a full buffer's flush leaves it running.
            buffer.flushScheduled = true
            buffer.eventLoop.assumeIsolated().scheduleTask(in: Self.flushInterval) { [self] in
                buffer.flushScheduled = false
                flush(buffer)
            }
        }
    }

    private func flush(_ buffer: Buffer) {
        guard buffer.bytes.readableBytes > 0 else { return }
        sink.write(buffer.bytes)
        buffer.fresh()
    }

    /// Every loop's lines written now (drain, shutdown): none is lost on SIGTERM.
    func flushAll() async {
        for buffer in buffers.values {
            try? await buffer.eventLoop.submit { [self] in flush(buffer) }.get()
        }
    }
}
