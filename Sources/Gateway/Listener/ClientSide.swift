import NIOCore
import NIOHTTP1

/// Where a call's answer goes: an HTTP/1.1 connection, or one HTTP/2 stream
/// handled inline on its connection. The call (ClientExchange and its
/// runner, CallRunner) speaks only to this, so nothing in the call's
/// logic knows the protocol.
protocol ClientSide: AnyObject {
    var eventLoop: EventLoop { get }
    var allocator: ByteBufferAllocator { get }
    /// Whether the client can take more of the response now.
    var isWritable: Bool { get }
    var isActive: Bool { get }
    /// Where its exchange is (waiting for a head, a request read, its
    /// answer written) and the client-side waits: kept in the connection's
    /// (HTTP/1.1) or the stream's (HTTP/2) machine, which moves it as
    /// requests are read; the call's side moves it as answers are written.
    var exchange: ExchangeStateMachine<LoopInstant> { get set }
    /// The peer's address as text, formatted once per connection.
    var peerAddress: String { get }
    /// The address the client connected to, `host:port` (the authority an
    /// absolute-form target must name to be this gateway's own).
    var localAuthority: String { get }
    /// The connection's port, local address and TLS, for filters' properties.
    var connectionFacts: ConnectionFacts { get }
    func write(_ part: ResponsePart)
    func flush()
    /// Ends the response and flushes; `close`: the connection (HTTP/1.1) or
    /// the stream (HTTP/2) ends with it.
    func end(close: Bool)
    /// Cuts the connection (HTTP/1.1) or resets the stream (HTTP/2).
    func close()
    /// Pauses or resumes reading the request (backpressure for streamed bodies).
    func setReading(_ on: Bool)
    /// How the body of the request whose head was read last is framed.
    var requestFraming: RequestFraming { get }
    /// Calls the runner's `deadlinePassed()` at `when` or later (a
    /// connection's one LazyTimer serves its calls or streams).
    func wake(at when: NIODeadline)
    /// An HTTP/2 stream carries one exchange; an HTTP/1.1 connection waits for the next.
    var carriesOneExchange: Bool { get }
    /// After a 101 the connection (or an extended-CONNECT HTTP/2 stream,
    /// RFC 8441) carries `tunnel`'s bytes; false where that cannot be.
    func startTunnel(_ tunnel: Tunnel) -> Bool
    /// Whether a 101 can turn this into a tunnel: an HTTP/1.1 connection, or
    /// an HTTP/2 stream opened by an extended CONNECT.
    var canTunnel: Bool { get }
}
