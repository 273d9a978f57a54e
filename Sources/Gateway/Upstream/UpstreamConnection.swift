import NIOCore
import NIOHTTP1
import Rewriter

/// What receives an upstream's response, part by part, on the connection's
/// event loop (the downstream call's own loop).
protocol UpstreamResponseDelegate: AnyObject {
    /// Consumed: the call edits the head it was handed in place.
    func upstreamHead(_ head: consuming ResponseHead)
    func upstreamBody(_ buffer: ByteBuffer)
    func upstreamEnd()
    /// `progress`: how far the try got before it failed.
    func upstreamFailed(_ error: UpstreamError, progress: TryProgress)
    /// The upstream socket can take more (or no more) of a streamed request body.
    func upstreamWritabilityChanged(_ writable: Bool)
    /// The end of one read batch: the time to flush what was written downstream.
    func upstreamReadComplete()
    /// The upstream answered an upgrade request with 101: `connection` now
    /// carries the other protocol's bytes (its exchange is over).
    func upstreamSwitched(_ head: ResponseHead, connection: any UpstreamConnection)
}

/// How far a failed try got: what decides whether it may be sent again.
enum TryProgress: Sendable {
    /// Provably no byte of the request reached the upstream: the connection
    /// was closed before it was written, or closed by the failing write itself.
    case unsent
    /// The request went out (wholly or in part); no response yet.
    case sent
    /// A response (or bytes of a malformed one) arrived.
    case responseStarted
}

/// Where a call sends its request and reads its response: a pooled
/// HTTP/1.1 connection (`HTTP1UpstreamConnection`) or one stream of a
/// multiplexed HTTP/2 connection (`HTTP2UpstreamStream`). Lives on its
/// event loop only.
protocol UpstreamConnection: AnyObject {
    var upstream: String { get }
    /// Where it goes: tries are counted on it while in flight.
    var endpoint: Endpoint { get }
    /// `host:port` it is connected to, for the access log.
    var peerAddress: String { get }
    /// The exchange in flight, shared bookkeeping of both kinds.
    var exchange: UpstreamExchange { get set }
    /// Whether more of a streamed request body can go now.
    var isWritable: Bool { get }
    /// Back-pressure from a slow client: stop (or resume) reading the response.
    func setReading(_ on: Bool)
    /// Ends the connection (HTTP/1.1) or resets the stream (HTTP/2): its state is unknown.
    func close()
    /// After a 101: the connection carries `tunnel`'s bytes; false where it cannot (an HTTP/2 stream).
    func startTunnel(_ tunnel: Tunnel) -> Bool
    /// Sends the whole request (head, buffered body, end).
    func send(_ request: UpstreamRequest, delegate: UpstreamResponseDelegate)
    /// Starts a request whose body follows part by part (`sendBody`, `sendEnd`).
    func sendHead(_ request: UpstreamRequest, delegate: UpstreamResponseDelegate)
    func sendBody(_ buffer: ByteBuffer)
    func sendEnd()
    /// The call ended before the connection was used.
    func giveBack()
    /// The response ended: the connection is reused or closed.
    /// `requestComplete`: its request was written whole.
    func responseEnded(requestComplete: Bool)
}

extension UpstreamConnection {
    /// Sends a request whose body follows its head as `parts` (the buffers
    /// it is already in) and, when `end`, its end; more may follow by
    /// `sendBody`. Returns false when the connection failed inside the head's
    /// write, which ended the try (its delegate was told): nothing more goes.
    /// The one way both a client's call and the gateway's own calls stream.
    func sendStreamed(_ request: UpstreamRequest, parts: some Sequence<ByteBuffer>, end: Bool, delegate: UpstreamResponseDelegate) -> Bool {
        sendHead(request, delegate: delegate)
        guard exchange.delegate === delegate else { return false }
        for part in parts { sendBody(part) }
        if end { sendEnd() }
        return true
    }

    /// A part of the response arrived.
    func received(_ part: consuming ResponsePart) {
        guard let delegate = exchange.delegate else { return }
        switch consume part {
        case .head(let head):
            switch exchange.headArrived(head, from: upstream) {
            case .interim: return
            case .forward: delegate.upstreamHead(consume head)
            case .switched: delegate.upstreamSwitched(head, connection: self)
            case .refused(let error): failed(error, responseArrived: true)
            }
        case .body(let buffer):
            delegate.upstreamBody(buffer)
        case .end:
            responseEnded(requestComplete: exchange.end().requestComplete)
            delegate.upstreamEnd()
        }
    }

    /// The exchange in flight, if any, failed: the connection is closed.
    /// `responseArrived`: bytes of a response came (a malformed one), so the
    /// upstream saw the request.
    func failed(_ error: UpstreamError, responseArrived: Bool = false) {
        let progress = responseArrived ? .responseStarted : exchange.progress
        exchange.end().delegate?.upstreamFailed(error, progress: progress)
        close()
    }

    /// The channel is closed: an exchange in flight is cut short.
    func exchangeClosed() {
        let progress = exchange.progress
        exchange.end().delegate?.upstreamFailed(.reset("the upstream closed the connection"), progress: progress)
    }

    /// The caller gives up (client gone, deadline passed): the connection is
    /// in an unknown state and is closed, not reused.
    func abandon() {
        _ = exchange.end()
        close()
    }

    func readComplete() { exchange.delegate?.upstreamReadComplete() }

    func writabilityChanged() { exchange.delegate?.upstreamWritabilityChanged(isWritable) }
}

/// Pauses a channel's reading while its reader cannot take more, through
/// NIO's autoRead, set only when the gate changes (back-pressure, rare):
/// a handler holding every `read()` instead cost a pipeline hop per read.
/// The channel is passed in, not kept: a weak reference would move the
/// channel's reference count to a side table, slowing every retain of it.
struct ReadGate {
    private var open = true

    mutating func set(open: Bool, on channel: (any Channel)?) {
        guard self.open != open else { return }
        self.open = open
        // Fails only on a closed channel, which reads nothing anyway.
        try? channel?.syncOptions?.setOption(ChannelOptions.autoRead, value: open)
    }
}
