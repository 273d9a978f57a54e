import CoreMetrics
import Foundation
import Logging
import NIOCore
import NIOPosix
import Rewriter
import Synchronization

/// Sends the spans of sampled calls to an OTLP collector in batches, from
/// an event loop of its own: a span is written as protobuf as it ends,
/// straight into its loop's buffer (one uncontended lock), and the call
/// never waits on the collector; the exporter only frames what the buffers
/// collected. The batches go
/// through the gateway's own upstream client (HTTP/1.1, or HTTP/2 for
/// gRPC). A full buffer or queue, or an export that fails, drops spans,
/// counted; nothing is retried (OpenTelemetry's batch processor does the same).
final class SpanExporter: Sendable {
    static let batchSize = 512
    /// Spans a loop's buffer, and the exporter's queue, hold at most, by
    /// count and in bytes (a span with a long path is large: the bytes bound
    /// holds whatever a client sends); a loop's buffer is emptied every
    /// tick, so it holds 160k small spans a second.
    static let bufferLimit = 16384
    static let bufferBytes = 4 << 20
    static let queueLimit = 65536
    static let queueBytes = 16 << 20
    /// A batch's bytes at most: with `concurrency` exports in flight, 4 MiB more held.
    static let batchBytes = 1 << 20
    /// Exports in flight at most.
    static let concurrency = 4
    static let tick = TimeAmount.milliseconds(100)
    /// A batch smaller than `batchSize` waits this many ticks at most.
    static let partialBatchTicks = 10

    let config: SpanExportConfig
    private let group: MultiThreadedEventLoopGroup
    private let loop: any EventLoop
    private let pools: UpstreamPools
    private let collector: UpstreamConfig
    private let target: String
    private let buffers: [ObjectIdentifier: Buffer]
    private let state: NIOLoopBoundBox<State>
    private let logger: Logger
    private let exported: Counter
    private let droppedFull: Counter
    private let droppedFailed: Counter
    /// Cleared before the exporter's loop shuts down: a late call's span is no reason to wake it.
    private let running = Atomic(true)

    /// One serving loop's spans, written, waiting for the exporter.
    final class Buffer: Sendable {
        fileprivate let spans: Mutex<Written>
        init(wallOffset: Int64) { spans = Mutex(Written(wallOffset: wallOffset)) }
    }

    /// Spans as `ScopeSpans.spans` entries, one after another.
    fileprivate struct Written {
        var entries = ByteBuffer()
        var count = 0
        /// Wall-clock minus monotonic nanoseconds, as of the last collection.
        var wallOffset: Int64
    }

    /// What a buffer held at a collection: its entries from `start` on are still to be sent.
    private struct Collected {
        var entries: ByteBuffer
        var start: Int
        var count: Int
    }

    private struct State {
        /// What the buffers held at each collection, oldest first, not copied again.
        var queue: [Collected] = []
        var queued = 0
        var queuedBytes = 0
        var inFlight = 0
        var ticksWaited = 0
        var task: RepeatedTask?
        var stopped = false
        /// The last export failed: logged once until one succeeds.
        var failing = false
    }

    init(config: SpanExportConfig, servingLoops: [any EventLoop], logger: Logger, factory: any MetricsFactory) throws {
        self.config = config
        self.logger = logger
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        loop = group.next()
        var collector = UpstreamConfig(name: "otlp", url: config.endpoint, maxConnections: Self.concurrency,
                                       connectTimeout: min(config.timeout, .seconds(5)), http2: config.transport == .grpc)
        collector.idleTimeout = .seconds(4)
        self.collector = collector
        target = switch config.transport {
        case .grpc: "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
        case .httpProtobuf: config.endpoint.basePath.isEmpty ? "/v1/traces" : config.endpoint.basePath
        }
        pools = try UpstreamPools(group: group, upstreams: [collector])
        let wallOffset = Self.wallOffset()
        buffers = Dictionary(uniqueKeysWithValues: servingLoops.map { (ObjectIdentifier($0), Buffer(wallOffset: wallOffset)) })
        state = NIOLoopBoundBox.makeBoxSendingValue(State(), eventLoop: loop)
        exported = Counter(label: "gatewayd_spans_exported_total", factory: factory)
        droppedFull = Counter(label: "gatewayd_spans_dropped_total", dimensions: [("reason", "queue-full")], factory: factory)
        droppedFailed = Counter(label: "gatewayd_spans_dropped_total", dimensions: [("reason", "export-failed")], factory: factory)
        loop.execute { [self] in
            state.value.task = loop.scheduleRepeatedTask(initialDelay: Self.tick, delay: Self.tick) { [self] _ in collect(flush: false) }
        }
    }

    func buffer(for eventLoop: any EventLoop) -> Buffer { buffers[ObjectIdentifier(eventLoop)]! }

    /// A call's span, written into its event loop's `buffer`. A buffer
    /// that holds a whole batch is collected at once rather than at the next
    /// tick: it stays small enough to be written in cache.
    func record(_ span: Span, into buffer: Buffer) {
        let count = buffer.spans.withLock { buffered in
            guard buffered.count < Self.bufferLimit, buffered.entries.readableBytes < Self.bufferBytes else { return 0 }
            OTLPTraces.write(span, wallOffset: buffered.wallOffset, into: &buffered.entries)
            buffered.count += 1
            return buffered.count
        }
        if count == 0 { droppedFull.increment() }
        if count == Self.batchSize, running.load(ordering: .relaxed) { loop.execute { [self] in collect(flush: false) } }
    }

    /// A span made off the calls' loops (a health check's): straight to the queue.
    func record(_ span: Span) {
        loop.execute { [self] in
            var entry = ByteBuffer()
            OTLPTraces.write(span, wallOffset: Self.wallOffset(), into: &entry)
            enqueue(entry, count: 1)
        }
    }

    /// Sends what is left, waiting at most `timeout` for it, and stops.
    func stop(timeout: Duration) async {
        running.store(false, ordering: .relaxed)
        let done = loop.makePromise(of: Void.self)
        loop.execute { [self] in
            state.value.task?.cancel()
            state.value.stopped = true
            collect(flush: true)
            waitForExports(done, until: .now() + timeout.timeAmount)
        }
        try? await done.futureResult.get()
        try? await group.shutdownGracefully()
    }

    private func waitForExports(_ done: EventLoopPromise<Void>, until deadline: NIODeadline) {
        if state.value.inFlight == 0 || NIODeadline.now() >= deadline { return done.succeed() }
        loop.scheduleTask(in: .milliseconds(10)) { [self] in waitForExports(done, until: deadline) }
    }

    private func enqueue(_ entries: ByteBuffer, count: Int) {
        let room = max(0, Self.queueLimit - state.value.queued)
        let roomBytes = max(0, Self.queueBytes - state.value.queuedBytes)
        var kept = Collected(entries: entries, start: entries.readerIndex, count: count)
        if count > room || entries.readableBytes > roomBytes {
            // As many whole entries as fit both bounds.
            let (fit, end) = Self.prefix(of: entries, from: entries.readerIndex, count: min(count, room), bytes: roomBytes)
            kept.count = fit
            kept.entries.moveWriterIndex(to: end)
        }
        if kept.count < count { droppedFull.increment(by: count - kept.count) }
        guard kept.count > 0 else { return }
        state.value.queue.append(kept)
        state.value.queued += kept.count
        state.value.queuedBytes += kept.entries.writerIndex - kept.start
    }

    /// How many of the `count` entries of `entries` after `start` fit in
    /// `bytes`, and where they end.
    private static func prefix(of entries: ByteBuffer, from start: Int, count: Int, bytes: Int) -> (count: Int, end: Int) {
        var (at, taken) = (start, 0)
        while taken < count {
            let next = OTLPTraces.entryEnd(entries, from: at)
            guard next - start <= bytes else { break }
            (at, taken) = (next, taken + 1)
        }
        return (taken, at)
    }


    private func collect(flush: Bool) {
        let wallOffset = Self.wallOffset()
        for buffer in buffers.values {
            let empty = buffer.spans.withLock { buffered in
                buffered.wallOffset = wallOffset
                return buffered.count == 0
            }
            if empty { continue }
            // Swapped for a buffer with room for a batch: the calls' loop does not grow it from nothing each time.
            var taken = Written(entries: ByteBufferAllocator().buffer(capacity: Self.batchSize * 320), wallOffset: wallOffset)
            buffer.spans.withLock { swap(&taken, &$0) }
            enqueue(taken.entries, count: taken.count)
        }
        state.value.ticksWaited += 1
        send(flush: flush)
    }

    /// Whole batches while exports may start; a partial one once it has
    /// waited long enough (or when flushing).
    private func send(flush: Bool) {
        while state.value.inFlight < Self.concurrency, state.value.queued > 0 {
            let whole = state.value.queued >= Self.batchSize || state.value.queuedBytes >= Self.batchBytes
            guard whole || flush || state.value.ticksWaited >= Self.partialBatchTicks else { return }
            var batch: [ByteBuffer] = [], count = 0, bytes = 0
            while count < Self.batchSize, bytes < Self.batchBytes, let first = state.value.queue.first {
                let size = first.entries.writerIndex - first.start
                var (taken, end) = (first.count, first.entries.writerIndex)
                if first.count > Self.batchSize - count || size > Self.batchBytes - bytes {
                    (taken, end) = Self.prefix(of: first.entries, from: first.start, count: Self.batchSize - count, bytes: Self.batchBytes - bytes)
                    // A single span larger than a batch still goes, alone.
                    if taken == 0, count == 0 { (taken, end) = (1, OTLPTraces.entryEnd(first.entries, from: first.start)) }
                    if taken == 0 { break }
                }
                batch.append(first.entries.getSlice(at: first.start, length: end - first.start)!)
                if taken == first.count {
                    state.value.queue.removeFirst()
                } else {
                    state.value.queue[0].start = end
                    state.value.queue[0].count -= taken
                }
                count += taken
                bytes += end - first.start
            }
            state.value.queued -= count
            state.value.queuedBytes -= bytes
            state.value.ticksWaited = 0
            export(batch, count: count)
        }
    }

    private func export(_ batch: [ByteBuffer], count: Int) {
        state.value.inFlight += 1
        let head = OTLPTraces.requestHead(for: batch, serviceName: config.serviceName, grpc: config.transport == .grpc)
        var headers: HeaderList = ["Host": config.endpoint.authority]
        switch config.transport {
        case .httpProtobuf:
            headers.add("Content-Type", "application/x-protobuf")
        case .grpc:
            headers.add("Content-Type", "application/grpc")
            headers.add("TE", "trailers")
        }
        for field in config.headers { headers.add(field.name, field.value) }
        let request = UpstreamRequest(method: "POST", target: target, headers: headers, body: nil)
        let transport = config.transport
        pools.pool(for: loop).ownCall(request, parts: [head] + batch, upstream: collector, timeout: config.timeout, maxBodyBytes: 64 * 1024)
            .flatMapThrowing { answer in
                let grpcStatus = answer.headers["grpc-status"] ?? "0"
                guard answer.status == 200, transport == .httpProtobuf || grpcStatus == "0" else {
                    throw ExportError(description: transport == .grpc ? "HTTP \(answer.status), grpc-status \(grpcStatus)" : "HTTP \(answer.status)")
                }
            }
            .whenComplete { [self] result in
                state.value.inFlight -= 1
                switch result {
                case .success:
                    exported.increment(by: count)
                    if state.value.failing {
                        state.value.failing = false
                        logger.notice("span export: the collector at \(config.endpoint) takes spans again")
                    }
                case .failure(let error):
                    droppedFailed.increment(by: count)
                    if !state.value.failing {
                        state.value.failing = true
                        logger.warning("span export to \(config.endpoint) failed (\(error)): spans are dropped until it works again")
                    }
                }
                if !state.value.stopped { send(flush: false) }
            }
    }

    /// Wall-clock minus monotonic nanoseconds, now.
    private static func wallOffset() -> Int64 {
        var wall = timespec()
        clock_gettime(CLOCK_REALTIME, &wall)
        return Int64(wall.tv_sec) * 1_000_000_000 + Int64(wall.tv_nsec) - Int64(NIODeadline.now().uptimeNanoseconds)
    }
}

private struct ExportError: Error, CustomStringConvertible {
    var description: String
}

/// One event loop's way to the span exporter.
struct SpanSink: Sendable {
    let exporter: SpanExporter
    let buffer: SpanExporter.Buffer

    func send(_ span: Span) { exporter.record(span, into: buffer) }
}
