/// The byte side of one HTTP/1.1 client connection as a value: whether its
/// input is read as requests, whether the channel reads at all
/// (back-pressure), and how the connection ends — at once, once its writes
/// are out, or lingering (nginx's lingering close). Keep-alive and
/// pipelining follow from it: after a response that keeps the connection,
/// the requests waiting are read next.
struct HTTP1ConnectionStateMachine: Sendable {
    enum State: Hashable, Sendable {
        /// Input is read as requests.
        case reading
        /// Input is dropped: after a malformed request, or while the
        /// connection closes or lingers.
        case discarding
    }

    enum Action: Hashable, Sendable {
        case none
        /// Read requests from the bytes waiting.
        case parse
        case close
        /// Close once what was written is out.
        case closeAfterWrites
        /// Stop sending once what was written is out, drop what still
        /// comes, and close when the client does or after the linger time.
        case lingerAfterWrites
    }

    private(set) var state = State.reading
    /// The client closed its sending side (allowed: RFC 9112 section 9.6):
    /// the requests it sent are answered, then the connection closes.
    private(set) var inputClosed = false
    private var callWantsInput = true
    private var tooMuchWaiting = false

    var readsRequests: Bool { state == .reading }
    /// Whether the channel reads: the call and the bytes waiting both allow it.
    var readOpen: Bool { callWantsInput && !tooMuchWaiting }

    /// A malformed request: nothing after it can be trusted.
    mutating func malformed() { state = .discarding }

    /// The client stopped sending. `midRequest`: part of a request was read
    /// (it can never complete now).
    mutating func inputEnded(midRequest: Bool) -> Action {
        inputClosed = true
        return midRequest || state == .discarding ? .close : .parse
    }

    /// A pass over the waiting bytes ended with nothing in flight.
    mutating func idleAfterParse() -> Action {
        guard inputClosed, state == .reading else { return .none }
        state = .discarding
        return .closeAfterWrites
    }

    /// A response ended. `unreadInput`: the client may still be sending (a
    /// request or body not read to its end); closing with bytes unread would
    /// reset the connection, and the reset can destroy the response before
    /// the client reads it — so the connection lingers.
    mutating func responseEnded(close: Bool, unreadInput: Bool) -> Action {
        guard close else { return .parse }
        guard !inputClosed, unreadInput else { return .closeAfterWrites }
        state = .discarding
        callWantsInput = true
        tooMuchWaiting = false
        return .lingerAfterWrites
    }

    /// The call pauses or resumes the request body. Returns whether the read gate changed.
    mutating func callWantsInput(_ on: Bool) -> Bool { changingGate { $0.callWantsInput = on } }

    /// Bytes waiting behind an unanswered request reached (or left) their bound.
    mutating func waiting(tooMuch: Bool) -> Bool { changingGate { $0.tooMuchWaiting = tooMuch } }

    private mutating func changingGate(_ change: (inout Self) -> Void) -> Bool {
        let before = readOpen
        change(&self)
        return readOpen != before
    }
}
