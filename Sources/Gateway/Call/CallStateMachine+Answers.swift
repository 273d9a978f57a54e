import NIOCore

/// What the call's machine answers besides its `Action`s: what a connection
/// that arrived is for, what a response head starts, and what a failed or
/// judged try becomes.
extension CallStateMachine {
    /// What a connection that arrived is for.
    enum ConnectionAction: Equatable, Sendable {
        /// Send the request on it (`streamed`: its head, then the body parts
        /// read meanwhile, and the body's end when it came); when the route
        /// has one, arm a per-try timer carrying `token`.
        case send(Token, perTryTimeout: Duration?, streamed: StreamedStart?)
        /// The call or try it was for is over: back to its pool.
        case giveBack
    }

    struct StreamedStart: Equatable, Sendable {
        var pending: [ByteBuffer]
        var end: Bool
    }

    /// What a try's response head starts.
    enum HeadAction: Equatable, Sendable {
        /// Held whole for the validators that read bodies (`responseEnded` gives it back).
        case hold
        /// Judged from the head now, by the validators and retry policy.
        case judge
        /// To the client as it is; its endpoint hears whether it was a 5xx.
        case forward
    }

    /// What becomes of a try that failed or was judged.
    enum Verdict: Equatable, Sendable {
        /// Its answer goes to the client as it is (accepted, or no try left);
        /// a failure's is the gateway's 502.
        case forward
        /// The client gets a 502 naming `validator`.
        case fail(validator: String)
        /// The response already went to the client: it is cut short.
        case cutShort
        /// The refused answer is read to its end on its connection, which is
        /// kept; the retry follows (`drained()`).
        case drain
        /// Its connection (if still held) is dropped and the next try starts: `next`.
        case retry(next: Action)
        /// A credential refresh, then the next try.
        case refresh(RefreshSpec)
    }

    /// A verdict, and what the retry policy decided for the try's log line (nil: it decided nothing).
    struct Judged: Equatable, Sendable {
        var verdict: Verdict
        var decided: RetryState<Instant>.Action?
    }

    /// Refused answers up to this size are drained, not dropped with their connection.
    static var drainLimit: Int { 64 * 1024 }

    /// A pass-through route's request body, streamed as it arrives. It
    /// outlives a call that ends first: the rest is read and dropped.
    struct StreamedBody: Sendable {
        /// Parts read before the upstream connection was ready.
        var pending: [ByteBuffer] = []
        var ended = false
        var connected = false
    }
}
