import CoreMetrics
import Logging
import NIOCore
import NIOEmbedded
import Testing
@testable import Gateway

/// The connection handlers and the call runner without a socket: bytes in
/// through an `EmbeddedChannel`, bytes out read back, time passed by hand.
/// The built-in echo answers in process, so a whole call runs here.
@Suite(.ownThreads) struct EmbeddedHandlerTests {
    static let yaml = """
        listeners: [{address: 127.0.0.1:0, protocols: [http1, h2c]}]
        limits: {header_timeout: 2s, idle_timeout: 5s}
        routes:
          - {name: echo, match: {prefix: /e/}, upstream: echo, response_headers: {set: {X-Route: echo}}}
        """

    static func channel(_ handler: (ListenerSlot, EmbeddedChannel) -> any ChannelHandler) throws -> EmbeddedChannel {
        let config = try ConfigLoader.load(yaml: yaml).config
        let channel = EmbeddedChannel()
        let metrics = GatewayMetrics(factory: NOOPMetricsHandler.instance)
        let context = ListenerContext(config: config, router: Router(config: config, metrics: metrics),
                                      pools: try UpstreamPools(group: channel.embeddedEventLoop, upstreams: config.upstreams), modifiers: [],
                                      validators: [], accessLog: nil, logger: Logger(label: "test"), metrics: metrics, tls: nil)
        try channel.connect(to: SocketAddress(ipAddress: "192.0.2.7", port: 4711)).wait()
        try channel.pipeline.syncOperations.addHandler(handler(ListenerSlot(context), channel))
        return channel
    }

    static func written(_ channel: EmbeddedChannel) throws -> String {
        var out = ""
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { out += String(buffer: buffer) }
        return out
    }

    @Test func http1PipelinedCallsAreAnsweredInOrderAndCloseWhenAsked() throws {
        let channel = try Self.channel { HTTP1ConnectionHandler(slot: $0, channel: $1) }
        // Two requests in one read, the second arriving in pieces after it.
        try channel.writeInbound(ByteBuffer(string: "GET /e/a?x=1 HTTP/1.1\r\nHost: h\r\n\r\nPOST /e/b HTTP/1.1\r\nHost: h\r\nContent-Le"))
        try channel.writeInbound(ByteBuffer(string: "ngth: 2\r\nConnection: close\r\n\r\nhi"))
        let out = try Self.written(channel)
        let answers = out.components(separatedBy: "HTTP/1.1 200 OK\r\n").dropFirst()
        #expect(answers.count == 2, "\(out)")
        #expect(answers.first?.contains(#""path":"/e/a","query":"x=1""#) == true && answers.first?.contains("X-Route: echo\r\n") == true)
        #expect(answers.last?.contains(#""method":"POST","path":"/e/b""#) == true && answers.last?.contains("Connection: close\r\n") == true)
        #expect(answers.last?.contains(#"["X-Forwarded-For","192.0.2.7"]"#) == true, "\(answers.last ?? "")")
        // The second asked to close: the connection is closed once it is written.
        #expect(!channel.isActive)
    }

    @Test func http1RefusalsAndTheHeaderTimeoutWithoutASocket() throws {
        let channel = try Self.channel { HTTP1ConnectionHandler(slot: $0, channel: $1) }
        try channel.writeInbound(ByteBuffer(string: "GET /nowhere HTTP/1.1\r\nHost: h\r\n\r\n"))
        let refused = try Self.written(channel)
        #expect(refused.hasPrefix("HTTP/1.1 404 Not Found\r\n") && refused.contains("application/problem+json"), "\(refused)")
        #expect(channel.isActive)
        // Nothing more comes: idle_timeout closes the connection, and not a moment before.
        channel.embeddedEventLoop.advanceTime(by: .seconds(4))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        #expect(!channel.isActive)
    }

    @Test func http1AHeadThatNeverEndsIsClosedAtTheHeaderTimeout() throws {
        let channel = try Self.channel { HTTP1ConnectionHandler(slot: $0, channel: $1) }
        try channel.writeInbound(ByteBuffer(string: "GET /e/slow HTTP/1.1\r\nHost: h\r\n"))
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1900))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(200))
        #expect(!channel.isActive)
        #expect(try Self.written(channel).isEmpty)
    }

    /// HPACK literal fields without indexing (RFC 7541 §6.2.2), no Huffman.
    static func headerBlock(_ fields: [(String, String)]) -> [UInt8] {
        var block: [UInt8] = []
        for (name, value) in fields {
            block.append(0x00)
            block.append(UInt8(name.utf8.count))
            block += Array(name.utf8)
            block.append(UInt8(value.utf8.count))
            block += Array(value.utf8)
        }
        return block
    }

    /// Frames as (type, flags, stream, payload).
    static func frames(_ bytes: [UInt8]) -> [(type: UInt8, flags: UInt8, stream: UInt32, payload: [UInt8])] {
        var frames: [(UInt8, UInt8, UInt32, [UInt8])] = []
        var rest = bytes[...]
        while rest.count >= 9 {
            let b = Array(rest.prefix(9))
            let length = Int(b[0]) << 16 | Int(b[1]) << 8 | Int(b[2])
            guard rest.count >= 9 + length else { break }
            let stream = (UInt32(b[5]) & 0x7F) << 24 | UInt32(b[6]) << 16 | UInt32(b[7]) << 8 | UInt32(b[8])
            frames.append((b[3], b[4], stream, Array(rest.dropFirst(9).prefix(length))))
            rest = rest.dropFirst(9 + length)
        }
        return frames
    }

    @Test func http2StreamsAreServedInlineWithoutASocket() throws {
        let channel = try Self.channel { slot, _ in HTTP2ServerHandler(slot: slot) }
        let request = { (path: String) in
            Self.headerBlock([(":method", "GET"), (":scheme", "http"), (":authority", "h"), (":path", path)])
        }
        var input = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + NGHTTP2Client.frame(type: 0x4, flags: 0, stream: 0, payload: [])
        input += NGHTTP2Client.frame(type: 0x1, flags: 0x5, stream: 1, payload: request("/e/one"))
        input += NGHTTP2Client.frame(type: 0x1, flags: 0x5, stream: 3, payload: request("/e/two"))
        try channel.writeInbound(ByteBuffer(bytes: input))
        var out: [UInt8] = []
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { out += Array(buffer.readableBytesView) }
        let frames = Self.frames(out)
        for (stream, path) in [(UInt32(1), "/e/one"), (3, "/e/two")] {
            #expect(frames.contains { $0.type == 0x1 && $0.stream == stream && $0.flags & 0x4 != 0 })
            let data = frames.filter { $0.type == 0x0 && $0.stream == stream }
            #expect(data.last?.flags == 0x1)
            #expect(String(decoding: data.flatMap(\.payload), as: UTF8.self).contains(#""path":"\#(path)""#))
        }
        // A request on an id the client skipped is a connection error.
        try channel.writeInbound(ByteBuffer(bytes: NGHTTP2Client.frame(type: 0x1, flags: 0x5, stream: 9, payload: request("/e/nine"))
            + NGHTTP2Client.frame(type: 0x1, flags: 0x5, stream: 7, payload: request("/e/seven"))))
        var after: [UInt8] = []
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { after += Array(buffer.readableBytesView) }
        let goAway = Self.frames(after).first { $0.type == 0x7 }
        #expect(goAway.map { Array($0.payload[4..<8]) } == [0, 0, 0, 1], "PROTOCOL_ERROR")
        #expect(!Self.frames(after).contains { $0.stream == 7 })
    }
}
