import CoreMetrics
import Glibc
import Logging
import NIOCore
import NIOEmbedded
@testable import Gateway

/// A gateway's whole call path without a socket, as async-http-client tests
/// its handlers: the client's connection is an `EmbeddedChannel`, and every
/// upstream connection the pool opens is another on the same
/// `EmbeddedEventLoop` (through `UpstreamConnector`). Bytes go in and are
/// read back on both sides; time passes only by `advance`.
final class EmbeddedGateway {
    let loop = EmbeddedEventLoop()
    let client: EmbeddedChannel
    private let opened: Opened

    /// The upstream connections in the order they were opened; `refuse`
    /// fails the next connects, `hold` keeps the next ones pending until `held` runs.
    final class Opened: @unchecked Sendable {
        var channels: [EmbeddedChannel] = []
        var refuse = 0
        var hold = 0
        var held: [() -> Void] = []
    }

    init(_ yaml: String, http2: Bool = false) throws {
        let config = try ConfigLoader.load(yaml: yaml).config
        let loop = loop
        let opened = Opened()
        self.opened = opened
        let connector = UpstreamConnector { url, _, _, initialize in
            guard opened.refuse == 0 else {
                opened.refuse -= 1
                return loop.makeFailedFuture(IOError(errnoCode: ECONNREFUSED, reason: "connect"))
            }
            let channel = EmbeddedChannel(loop: loop)
            opened.channels.append(channel)
            let connect = { () -> EventLoopFuture<Channel> in
                initialize(channel)
                    .flatMap { channel.connect(to: try! SocketAddress(ipAddress: "192.0.2.1", port: url.port)) }
                    .map { channel as Channel }
            }
            guard opened.hold > 0 else { return connect() }
            opened.hold -= 1
            let promise = loop.makePromise(of: Channel.self)
            opened.held.append { connect().cascade(to: promise) }
            return promise.futureResult
        }
        let metrics = GatewayMetrics(factory: NOOPMetricsHandler.instance)
        let context = ListenerContext(config: config, router: Router(config: config, metrics: metrics),
                                      pools: try UpstreamPools(group: loop, upstreams: config.upstreams, connector: connector),
                                      modifiers: [], validators: [], accessLog: nil, logger: Logger(label: "test"), metrics: metrics, tls: nil)
        client = EmbeddedChannel(loop: loop)
        try client.connect(to: SocketAddress(ipAddress: "192.0.2.7", port: 4711)).wait()
        let slot = ListenerSlot(context)
        let handler: any ChannelHandler = http2 ? HTTP2ServerHandler(slot: slot) : HTTP1ConnectionHandler(slot: slot, channel: client)
        try client.pipeline.syncOperations.addHandler(handler)
    }

    var upstreams: [EmbeddedChannel] { opened.channels }

    /// The next `count` connects fail as a refused TCP connect does.
    func refuseConnects(_ count: Int) { opened.refuse = count }

    /// The next `count` connects stay pending until `completeHeldConnects`.
    func holdConnects(_ count: Int) { opened.hold = count }

    func completeHeldConnects() {
        let held = opened.held
        opened.held = []
        for connect in held { connect() }
        loop.run()
    }

    /// Bytes from the client.
    func send(_ text: String) throws {
        try client.writeInbound(ByteBuffer(string: text))
        loop.run()
    }

    /// A bodiless GET of `target` from the client.
    func get(_ target: String) throws { try send("GET \(target) HTTP/1.1\r\nHost: h\r\n\r\n") }

    /// What the gateway wrote to its client since the last read.
    func answer() throws -> String { try Self.drain(client) }

    /// What went to upstream connection `index` since the last read.
    func request(_ index: Int) throws -> String { try Self.drain(upstreams[index]) }

    /// Bytes from upstream connection `index`.
    func respond(_ index: Int, _ text: String) throws {
        try upstreams[index].writeInbound(ByteBuffer(string: text))
        loop.run()
    }

    /// Upstream connection `index` breaks (the peer resets it).
    func reset(_ index: Int) {
        upstreams[index].pipeline.fireErrorCaught(IOError(errnoCode: ECONNRESET, reason: "read"))
        _ = upstreams[index].close()
        loop.run()
    }

    func advance(_ amount: TimeAmount) { loop.advanceTime(by: amount) }

    static func drain(_ channel: EmbeddedChannel) throws -> String {
        var out = ""
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { out += String(buffer: buffer) }
        return out
    }
}
