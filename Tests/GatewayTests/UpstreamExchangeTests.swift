import CoreMetrics
import Logging
import NIOCore
import NIOHTTP1
import Rewriter
import Testing
@testable import Gateway

/// How far a try got, and what an upstream's 101 means, without a
/// connection: the progress decides whether a failed try may go again.
@Suite(.ownThreads) struct UpstreamExchangeTests {
    private final class Delegate: UpstreamResponseDelegate {
        func upstreamHead(_ head: consuming ResponseHead) {}
        func upstreamBody(_ buffer: ByteBuffer) {}
        func upstreamEnd() {}
        func upstreamFailed(_ error: UpstreamError, progress: TryProgress) {}
        func upstreamWritabilityChanged(_ writable: Bool) {}
        func upstreamReadComplete() {}
        func upstreamSwitched(_ head: ResponseHead, connection: any UpstreamConnection) {}
    }

    /// An upstream as a config declares it; tries are counted on its one endpoint (which it owns).
    private static func upstream() throws -> UpstreamState {
        let config = try ConfigLoader.load(yaml: """
            listeners: [{address: 127.0.0.1:0}]
            upstreams: {legacy: {url: "http://127.0.0.1:9"}}
            routes: [{name: r, upstream: legacy}]
            """).config
        let state = UpstreamState(config: config.upstreams[0], kept: [:], logger: Logger(label: "test"), factory: NOOPMetricsHandler.instance)
        return state
    }

    private static func head(_ status: Int, upgrade: String? = nil) -> ResponseHead {
        ResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: status), headers: upgrade.map { ["Upgrade": $0] } ?? [:])
    }

    @Test func aWholeRequestFailingInsideItsOneWriteWasNeverSent() throws {
        let upstream = try Self.upstream(), endpoint = upstream.endpoints[0], delegate = Delegate()
        var exchange = UpstreamExchange()
        exchange.begin(delegate, on: endpoint, upgrade: nil)
        exchange.requestCompleted()
        exchange.writing()
        #expect(exchange.progress == .unsent)
        #expect(endpoint.inFlight.load(ordering: .relaxed) == 1)
        // NIO closed the channel inside the write: the exchange ends there.
        let ended = exchange.end()
        #expect(ended.delegate === delegate && !ended.requestComplete && endpoint.inFlight.load(ordering: .relaxed) == 0)
        // The write returns afterwards: nothing more changes.
        exchange.written()
        #expect(exchange.state == .idle && exchange.progress == .unsent)
    }

    @Test func aStreamedRequestIsSentFromItsHeadAndCompleteOnlyAtItsEnd() throws {
        let upstream = try Self.upstream()
        var exchange = UpstreamExchange()
        exchange.begin(Delegate(), on: upstream.endpoints[0], upgrade: nil)
        exchange.written()
        #expect(exchange.progress == .sent && exchange.state == .sent(requestComplete: false))
        // The answer may come before the body ended: the connection's framing is then broken.
        #expect(exchange.headArrived(Self.head(200), from: "u").isForward)
        #expect(exchange.progress == .responseStarted)
        #expect(!exchange.end().requestComplete)
        exchange.begin(Delegate(), on: upstream.endpoints[0], upgrade: nil)
        exchange.written()
        exchange.requestCompleted()
        _ = exchange.headArrived(Self.head(200), from: "u")
        #expect(exchange.end().requestComplete)
    }

    @Test func interimAnswersAreNoStartOfTheResponse() throws {
        let upstream = try Self.upstream()
        var exchange = UpstreamExchange()
        exchange.begin(Delegate(), on: upstream.endpoints[0], upgrade: nil)
        exchange.requestCompleted()
        exchange.written()
        #expect(exchange.headArrived(Self.head(100), from: "u").isInterim)
        #expect(exchange.progress == .sent)
    }

    /// The hostile rows: an upstream that switches where no one asked, or to another protocol.
    @Test(arguments: [(nil, "websocket"), ("websocket", "h2c"), ("websocket", "websocket, h2c"), ("websocket", nil)] as [(String?, String?)])
    func aSwitchNoRouteAskedForFailsTheTry(asked: String?, offered: String?) throws {
        let upstream = try Self.upstream()
        var exchange = UpstreamExchange()
        exchange.begin(Delegate(), on: upstream.endpoints[0], upgrade: asked)
        exchange.written()
        guard case .refused(let error) = exchange.headArrived(Self.head(101, upgrade: offered), from: "u") else {
            Issue.record("a 101 to '\(offered ?? "")' was taken where '\(asked ?? "nothing")' was asked")
            return
        }
        #expect(error.summary.contains("switch"))
    }

    @Test func theSwitchAskedForEndsTheExchange() throws {
        let upstream = try Self.upstream(), endpoint = upstream.endpoints[0]
        var exchange = UpstreamExchange()
        exchange.begin(Delegate(), on: endpoint, upgrade: "websocket")
        exchange.written()
        guard case .switched = exchange.headArrived(Self.head(101, upgrade: "WebSocket"), from: "u") else {
            Issue.record("the switch asked for was refused")
            return
        }
        #expect(exchange.state == .idle && exchange.delegate == nil && endpoint.inFlight.load(ordering: .relaxed) == 0)
    }
}

extension UpstreamExchange.HeadVerdict {
    fileprivate var isForward: Bool { if case .forward = self { true } else { false } }
    fileprivate var isInterim: Bool { if case .interim = self { true } else { false } }
}
