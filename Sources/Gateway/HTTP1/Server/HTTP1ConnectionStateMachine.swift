/// The byte side of one HTTP/1.1 client connection as a value: where its
/// exchange is (a request read, its answer written), whether its input is
/// read as requests, whether the channel reads at all (back-pressure), and
/// how the connection ends — at once, once its writes are out, or lingering
/// (nginx's lingering close). Keep-alive and pipelining follow from it: the
/// next request is read only once the answer before it ended.
struct HTTP1ConnectionStateMachine: Sendable {
    enum State: Hashable, Sendable {
        /// Waiting for a request head: the first, or the next on a kept-alive connection.
        case idle
        /// A request head was read. `reading`: its body has not ended;
        /// `responding`: its answer has not.
        case exchanging(reading: Bool, responding: Bool)
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

    private(set) var state = State.idle
    /// The client closed its sending side (allowed: RFC 9112 section 9.6):
    /// the requests it sent are answered, then the connection closes.
    private(set) var inputClosed = false
    private var callWantsInput = true
    private var tooMuchWaiting = false

    var readsRequests: Bool { state != .discarding }

    /// Whether the next request part is handed to the call: its own body
    /// is, a pipelined request waits until the answer before it ended.
    var acceptsRequestParts: Bool {
        switch state {
        case .idle: true
        case .exchanging(let reading, let responding): reading || !responding
        case .discarding: false
        }
    }

    /// A request head was read (before the call sees it: it may be answered at once).
    mutating func requestHead() {
        if state == .idle { state = .exchanging(reading: true, responding: true) }
    }

    /// The request's end was read.
    mutating func requestEnded() {
        guard case .exchanging(true, let responding) = state else { return }
        state = responding ? .exchanging(reading: false, responding: true) : .idle
    }
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

    /// A pass over the waiting bytes ended: with nothing in flight, a client
    /// that stopped sending has had all its answers.
    mutating func idleAfterParse() -> Action {
        guard inputClosed, state == .idle else { return .none }
        state = .discarding
        return .closeAfterWrites
    }

    /// A response ended. `unreadInput`: the client may still be sending (a
    /// request or body not read to its end); closing with bytes unread would
    /// reset the connection, and the reset can destroy the response before
    /// the client reads it — so the connection lingers.
    mutating func responseEnded(close: Bool, unreadInput: Bool) -> Action {
        guard close else {
            if case .exchanging(let reading, _) = state { state = reading ? .exchanging(reading: true, responding: false) : .idle }
            return .parse
        }
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
