import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// An upstream on 127.0.0.1:0 that answers with exact bytes, scripted per
/// request line, and records the exact bytes each request arrived as (and
/// on which of its connections). It knows just enough HTTP to tell where a
/// request ends: the head, then Content-Length bytes or chunks up to the last.
final class RawUpstream: @unchecked Sendable {
    struct Answer: Sendable {
        var bytes: [UInt8]
        /// Close the connection after the response.
        var close = false
        /// Bytes written `after` the response (a broken upstream's stray body or second answer).
        var later: [UInt8] = []
        var after = TimeAmount.milliseconds(100)
        /// A slow service: the whole answer (and its close) only this long after the request.
        var delay: TimeAmount?
        init(_ text: String, close: Bool = false, later: String = "", after: TimeAmount = .milliseconds(100)) {
            bytes = Array(text.utf8)
            self.close = close
            self.later = Array(later.utf8)
            self.after = after
        }
    }

    struct Request: Sendable {
        var connection: Int
        var bytes: [UInt8]
        var text: String { String(decoding: bytes, as: UTF8.self) }
    }

    private let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    private let state = NIOLockedValueBox<(requests: [Request], connections: Int)>(([], 0))
    private let script: @Sendable (String) -> Answer
    private var channel: Channel?

    init(script: @escaping @Sendable (_ requestLine: String) -> Answer) { self.script = script }

    var requests: [Request] { state.withLockedValue { $0.requests } }
    /// The connections (numbered as `Request.connection`) that have closed.
    var closedConnections: Set<Int> { closed.withLockedValue { $0 } }
    private let closed = NIOLockedValueBox<Set<Int>>([])

    func start() async throws -> Int {
        Teardown.register { await self.stop() }
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { [state, script, closed] channel in
                let number = state.withLockedValue { $0.connections += 1; return $0.connections }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(Handler(connection: number, state: state, closed: closed, script: script))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        self.channel = channel
        return channel.localAddress!.port!
    }

    /// Once: a test's own stop and its scope's teardown may both ask.
    func stop() async {
        let first = stopped.withLockedValue { stopped in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        try? await channel?.close()
        try? await group.shutdownGracefully()
    }
    private let stopped = NIOLockedValueBox(false)

    private final class Handler: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        let connection: Int
        let state: NIOLockedValueBox<(requests: [Request], connections: Int)>
        let closed: NIOLockedValueBox<Set<Int>>
        let script: @Sendable (String) -> Answer
        var received: [UInt8] = []
        var framing = Framing()

        init(connection: Int, state: NIOLockedValueBox<(requests: [Request], connections: Int)>, closed: NIOLockedValueBox<Set<Int>>,
             script: @escaping @Sendable (String) -> Answer) {
            self.connection = connection
            self.state = state
            self.closed = closed
            self.script = script
        }

        func channelInactive(context: ChannelHandlerContext) {
            _ = closed.withLockedValue { $0.insert(connection) }
            context.fireChannelInactive()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            received += unwrapInboundIn(data).readableBytesView
            while let length = framing.requestLength(received) {
                let bytes = Array(received[..<length])
                received.removeFirst(length)
                framing = Framing()
                state.withLockedValue { $0.requests.append(Request(connection: connection, bytes: bytes)) }
                let line = String(decoding: bytes.prefix { $0 != UInt8(ascii: "\r") }, as: UTF8.self)
                let answer = script(line)
                let respond = {
                    let written = context.writeAndFlush(NIOAny(context.channel.allocator.buffer(bytes: answer.bytes)))
                    if answer.close { written.assumeIsolated().whenComplete { _ in context.close(promise: nil) } }
                }
                if let delay = answer.delay { context.eventLoop.assumeIsolated().scheduleTask(in: delay, respond) } else { respond() }
                if !answer.later.isEmpty {
                    context.eventLoop.assumeIsolated().scheduleTask(in: answer.after) {
                        context.writeAndFlush(NIOAny(context.channel.allocator.buffer(bytes: answer.later)), promise: nil)
                    }
                }
            }
        }
    }

    /// Where the first request in a growing buffer ends. Each read scans only
    /// the bytes not scanned before: a large upload costs time linear in its size.
    struct Framing {
        private var bodyStart: Int?
        private var length: Int?
        private var chunked = false
        private var scanned = 0

        mutating func requestLength(_ bytes: [UInt8]) -> Int? {
            if bodyStart == nil {
                guard let end = Self.find(Array("\r\n\r\n".utf8), in: bytes, from: max(0, scanned - 3)) else {
                    scanned = bytes.count
                    return nil
                }
                bodyStart = end
                scanned = end
                let head = String(decoding: bytes[..<end], as: UTF8.self).lowercased()
                chunked = head.contains("transfer-encoding: chunked")
                length = head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                    .flatMap { Int($0.dropFirst("content-length:".count).trimmingPrefix(" ")) } ?? 0
            }
            let start = bodyStart!
            guard chunked else { return bytes.count >= start + length! ? start + length! : nil }
            if bytes[start...].starts(with: Array("0\r\n\r\n".utf8)) { return start + 5 }
            guard let end = Self.find(Array("\r\n0\r\n\r\n".utf8), in: bytes, from: max(start, scanned - 6)) else {
                scanned = bytes.count
                return nil
            }
            return end
        }

        /// The index just past the first `needle` at or after `from`.
        private static func find(_ needle: [UInt8], in bytes: [UInt8], from: Int) -> Int? {
            guard bytes.count >= needle.count, from <= bytes.count - needle.count else { return nil }
            for i in from...(bytes.count - needle.count) where bytes[i] == needle[0] {
                if bytes[i..<(i + needle.count)].elementsEqual(needle) { return i + needle.count }
            }
            return nil
        }
    }
}
