import CoreMetrics
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Rewriter
import Testing
@testable import Gateway

/// The client's side of an exchange without a socket or a runner: request
/// parts in, what it wrote to its client and what it hands the runner out,
/// time passed by hand.
@Suite struct ClientExchangeTests {
    /// What a connection or stream was asked to do.
    final class RecordingClient: ClientSide {
        var exchange = ExchangeStateMachine<LoopInstant>()
        let loop = EmbeddedEventLoop()
        var framing = RequestFraming.none
        var parts: [ResponsePart] = []
        var ended: Bool?
        var closed = false
        var reading = true
        var wakes: [NIODeadline] = []

        var eventLoop: any EventLoop { loop }
        var allocator: ByteBufferAllocator { ByteBufferAllocator() }
        var isWritable: Bool { true }
        var isActive: Bool { !closed }
        var peerAddress: String { "192.0.2.9" }
        var localAuthority: String { "127.0.0.1:8080" }
        var connectionFacts: ConnectionFacts { ConnectionFacts() }
        var requestFraming: RequestFraming { framing }
        var carriesOneExchange: Bool { false }
        var canTunnel: Bool { true }
        func write(_ part: ResponsePart) { parts.append(part) }
        func flush() {}
        func end(close: Bool) { ended = close }
        func close() { closed = true }
        func setReading(_ on: Bool) { reading = on }
        func wake(at when: NIODeadline) { wakes.append(when) }
        func startTunnel(_ tunnel: Tunnel) -> Bool { false }

        var status: UInt? {
            guard case .head(let head) = parts.first else { return nil }
            return head.status.code
        }
        var body: String {
            parts.reduce(into: "") { text, part in if case .body(let buffer) = part { text += String(buffer: buffer) } }
        }
    }

    static let yaml = """
        listeners: [{address: 127.0.0.1:0}]
        limits: {max_body_bytes: 8, idle_timeout: 5s}
        upstreams: {legacy: {url: "http://192.0.2.1:9"}}
        routes:
          - {name: echo, match: {prefix: /e/}, upstream: echo}
          - {name: pass, match: {prefix: /p/}, upstream: legacy}
        """

    static func exchange(_ client: RecordingClient) throws -> ClientExchange {
        let config = try ConfigLoader.load(yaml: yaml).config
        let metrics = GatewayMetrics(factory: NOOPMetricsHandler.instance)
        let context = ListenerContext(config: config, router: Router(config: config, metrics: metrics),
                                      pools: try UpstreamPools(group: client.loop, upstreams: config.upstreams), modifiers: [], validators: [],
                                      accessLog: nil, logger: Logger(label: "test"), metrics: metrics, tls: nil)
        return ClientExchange(slot: ListenerSlot(context), client: client, seed: 7)
    }

    static func head(_ method: HTTPMethod, _ uri: String, _ fields: [(String, String)] = []) -> RequestHead {
        RequestHead(method: method, uri: uri, version: .http1_1, headers: HeaderList(fields.map { HeaderList.Field(name: $0.0, value: $0.1) }))
    }

    @Test func aBufferedBodyPastTheLimitIsRefusedAsItArrivesAndNothingMoreOfItCounts() throws {
        let client = RecordingClient()
        client.framing = .streamed
        let exchange = try Self.exchange(client)
        #expect(exchange.read(Self.head(.POST, "/e/x", [("Host", "h"), ("Transfer-Encoding", "chunked")])) == nil)
        exchange.bodyArrived(ByteBuffer(string: "12345"))
        #expect(client.parts.isEmpty)
        exchange.bodyArrived(ByteBuffer(string: "6789"))
        #expect(client.status == 413, "\(client.parts)")
        #expect(client.body.contains(#""route":"echo""#), "\(client.body)")
        #expect(client.ended == true)
        // What still comes is not a request any more.
        exchange.bodyArrived(ByteBuffer(string: "more"))
        #expect(exchange.readEnd() == nil)
        #expect(client.parts.count == 2)
        #expect(exchange.record.log.route == "echo" && exchange.record.log.bytes == client.body.utf8.count)
    }

    @Test func aBodyThatStopsComingIs408AtTheIdleTimeoutAndNotBefore() throws {
        let client = RecordingClient()
        client.framing = .length(6)
        let exchange = try Self.exchange(client)
        _ = exchange.read(Self.head(.POST, "/e/x", [("Host", "h"), ("Content-Length", "6")]))
        exchange.bodyArrived(ByteBuffer(string: "abc"))
        #expect(client.wakes.last == client.loop.now + .seconds(5))
        client.loop.advanceTime(by: .milliseconds(4900))
        exchange.timerFired()
        #expect(client.parts.isEmpty)
        client.loop.advanceTime(by: .milliseconds(200))
        exchange.timerFired()
        #expect(client.status == 408, "\(client.parts)")
        #expect(client.ended == true && !client.closed)
    }

    @Test func aPassThroughRouteHandsTheRunnerAStreamedCallWithTheClientPaused() throws {
        let client = RecordingClient()
        client.framing = .length(10)
        let exchange = try Self.exchange(client)
        let start = try #require(exchange.read(Self.head(.PUT, "/p/doc", [("Host", "h"), ("Content-Length", "010")])))
        #expect(start.call.streams && start.call.route.config.name == "pass")
        // One canonical length goes upstream (the framing, not a field); the body is the runner's to read, when a connection takes it.
        #expect(start.call.request.framing == .length(10) && !start.call.request.headers.contains("Content-Length"))
        #expect(start.call.request.body == nil)
        #expect(!client.reading && client.parts.isEmpty)
        #expect(start.call.requestID == exchange.record.log.requestID && exchange.record.log.route == "pass")
    }

    @Test func theEchoAnswersInPlaceAsOneTryOfItsRoute() throws {
        let client = RecordingClient()
        let exchange = try Self.exchange(client)
        #expect(exchange.read(Self.head(.GET, "/e/a?x=1", [("Host", "h"), ("X-Request-Id", "abc")])) == nil)
        #expect(exchange.readEnd() == nil)
        #expect(client.status == 200 && client.body.contains(#""path":"/e/a""#), "\(client.body)")
        #expect(client.ended == false)
        #expect(exchange.record.log.tries == 1 && exchange.record.log.upstreamStatus == 200 && exchange.record.log.requestID == "abc")
        // Kept alive: the next head must come within idle_timeout.
        #expect(client.wakes.last == client.loop.now + .seconds(5))
    }

    @Test func aMalformedRequestAfterAnAnswerIsAnsweredAndLoggedAsItsOwn() throws {
        let client = RecordingClient()
        let exchange = try Self.exchange(client)
        _ = exchange.read(Self.head(.GET, "/e/a", [("Host", "h")]))
        _ = exchange.readEnd()
        client.parts = []
        exchange.malformed(.malformed(HTTP1ParseError.malformed("bad chunk size")))
        #expect(client.status == 400 && client.ended == true, "\(client.parts)")
        #expect(exchange.record.log.method == "" && exchange.record.log.route == "-" && exchange.record.log.tries == 0)
    }
}

extension ClientExchange {
    /// A request head as a connection's machine reads it: the exchange
    /// moves first, then the call's side sees the head.
    fileprivate func read(_ head: consuming RequestHead) -> Start? {
        exchange.requestHead()
        return headArrived(head)
    }

    fileprivate func readEnd() -> Start? {
        exchange.requestEnded()
        return requestEnded()
    }
}
