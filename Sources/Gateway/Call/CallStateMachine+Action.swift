import NIOCore
import Rewriter

/// What the call's machine tells its runner: one `Action` per event, and
/// what a judged try leaves for the access log and its endpoint.
extension CallStateMachine {
    /// What a judged try leaves for the access log and its endpoint's outlier detection.
    struct TryEnd: Equatable, Sendable {
        var tries: Int
        /// Its outcome goes to its endpoint's outlier detection (once per try): `failure`, or fine.
        var tellsEndpoint: Bool
        var failure: OutlierConfig.Failure?
        /// What the retry policy decided, for the try's log line (nil: it decided nothing).
        var decided: RetryState<Instant>.Action?
        var decidedBy: String?
        var byCondition = false
        var result: TryLog.Result?
    }

    enum Action: Equatable, Sendable {
        /// Nothing to do (the event is stale, or only moved the state).
        case none
        case runModifiers(Token)
        /// Ask the route's cache: a stored answer, a fill under way to wait
        /// for, or a miss to fill (`lookedUp`).
        case lookUp(Token)
        case acquireConnection(Token)
        /// Send the request on the connection that arrived (`streamed`: its
        /// head, then the body parts read meanwhile, and the body's end when
        /// it came); when the route has one, arm a per-try timer carrying `token`.
        case send(Token, tries: Int, perTryTimeout: Duration?, streamed: StreamedStart?)
        /// The call or try the connection was for is over: back to its pool.
        case giveBack
        /// A request body's part that is not streamed: read into the call's buffer.
        case bufferBody(ByteBuffer)
        /// A streamed request body's part, to the try's connection.
        case sendBody(ByteBuffer)
        case sendEnd
        /// The client's reading resumes (the upstream takes more, or the rest of the body is read and dropped).
        case resumeClient
        /// The call's deadline is not reached yet: wake again then.
        case wake(at: Instant)
        /// The call's deadline passed: it ends as a 504, or cut short when its response already went to the client.
        case timeOutCall(forwarded: Bool)
        /// The current try ran out of time: abandon its connection, fail it as `timeout`.
        case timeOutTry
        /// Ask the route's retry budget for one retry (`budgetAnswered`).
        case askBudget
        /// The response head the runner holds goes to the client.
        case forwardHead(TryEnd?)
        /// A part of the answer goes to the client.
        case forwardBody(ByteBuffer)
        /// The answer's parts of this read go out.
        case flush
        /// The held answer went past the limit: it is let through as it is, the rest streams.
        case letThrough(head: ResponseHead, body: [UInt8], TryEnd?)
        /// The held answer, whole and accepted, goes to the client: the call is over.
        case writeHeld(head: ResponseHead, body: [UInt8], TryEnd?)
        /// The held answer, whole, goes through the route's `response:` (`answerTranslated`).
        case translate(head: ResponseHead, body: [UInt8])
        /// The answer to translate is larger than it may be held: a 502, its connection dropped.
        case answerTooLarge(TryEnd?)
        /// The refused answer is read to its end on its connection, which is kept; the retry follows.
        case drain(TryEnd)
        /// The try is dropped with its connection; the next starts after `after`.
        case retry(Token, after: Duration, TryEnd?)
        /// Wait out a backoff, then `backoffElapsed`.
        case backOff(Token, Duration)
        /// A credential refresh, then the try `next` (`credentialReady`, `credentialFailed`, `refreshUnavailable`).
        case startRefresh(RefreshSpec, next: Token, TryEnd)
        /// The client gets a 502 naming `validator`.
        case refuse(validator: String, status: Int?, TryEnd)
        /// The try failed with no try left: the gateway's 502.
        case failTry(UpstreamError, TryEnd?)
        /// The try failed after its response went to the client: cut short.
        case cutShort(UpstreamError, TryEnd?)
        /// The call ends with the gateway's answer.
        case respond(Problem, TryEnd?)
        /// The client broke its framing while its answer was under way: close.
        case closeClient
        /// The client broke its framing: the call is abandoned and the client gets `problem`, then the connection closes.
        case rejectRequest(Problem)
        /// The try's response ended: the call is over.
        case finish
    }

    struct StreamedStart: Equatable, Sendable {
        var pending: [ByteBuffer]
        var end: Bool
    }
}
