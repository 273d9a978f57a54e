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
        init(_ text: String, close: Bool = false) {
            bytes = Array(text.utf8)
            self.close = close
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

    func start() async throws -> Int {
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { [state, script] channel in
                let number = state.withLockedValue { $0.connections += 1; return $0.connections }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(Handler(connection: number, state: state, script: script))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        self.channel = channel
        return channel.localAddress!.port!
    }

    func stop() async {
        try? await channel?.close()
        try? await group.shutdownGracefully()
    }

    private final class Handler: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        let connection: Int
        let state: NIOLockedValueBox<(requests: [Request], connections: Int)>
        let script: @Sendable (String) -> Answer
        var received: [UInt8] = []

        init(connection: Int, state: NIOLockedValueBox<(requests: [Request], connections: Int)>, script: @escaping @Sendable (String) -> Answer) {
            self.connection = connection
            self.state = state
            self.script = script
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            received += unwrapInboundIn(data).readableBytesView
            while let length = Self.requestLength(received) {
                let bytes = Array(received[..<length])
                received.removeFirst(length)
                state.withLockedValue { $0.requests.append(Request(connection: connection, bytes: bytes)) }
                let line = String(decoding: bytes.prefix { $0 != UInt8(ascii: "\r") }, as: UTF8.self)
                let answer = script(line)
                let written = context.writeAndFlush(NIOAny(context.channel.allocator.buffer(bytes: answer.bytes)))
                if answer.close { written.assumeIsolated().whenComplete { _ in context.close(promise: nil) } }
            }
        }

        /// Where the first complete request in `bytes` ends.
        static func requestLength(_ bytes: [UInt8]) -> Int? {
            let text = String(decoding: bytes, as: UTF8.self)
            guard let headEnd = text.utf8.firstRange(of: "\r\n\r\n".utf8) else { return nil }
            let head = text[..<headEnd.lowerBound].lowercased()
            let bodyStart = text.utf8.distance(from: text.startIndex, to: headEnd.upperBound)
            if head.contains("transfer-encoding: chunked") {
                guard let last = bytes[bodyStart...].firstRange(of: Array("\r\n0\r\n\r\n".utf8)) else {
                    return bytes[bodyStart...].starts(with: Array("0\r\n\r\n".utf8)) ? bodyStart + 5 : nil
                }
                return last.upperBound
            }
            let length = head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                .flatMap { Int($0.dropFirst("content-length:".count).trimmingPrefix(" ")) } ?? 0
            return bytes.count >= bodyStart + length ? bodyStart + length : nil
        }
    }
}
