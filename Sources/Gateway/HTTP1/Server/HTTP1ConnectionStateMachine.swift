/// The byte side of one HTTP/1.1 client connection as a value: where its
/// exchange is (a request read, its answer written), whether the client
/// still sends, whether the channel reads at all (back-pressure), and how
/// the connection ends — at once, once its writes are out, or lingering
/// (nginx's lingering close). Keep-alive and pipelining follow from it: the
/// next request is read only once the answer before it ended.
struct HTTP1ConnectionStateMachine: Sendable {
    enum State: Hashable, Sendable {
        /// Waiting for a request head: the first, or the next on a kept-alive
        /// connection. `inputEnded`: the client closed its sending side (RFC
        /// 9112 section 9.6); what it sent is still read and answered, then
        /// the connection closes.
        case idle(inputEnded: Bool)
        /// A request head was read. `reading`: its body has not ended;
        /// `responding`: its answer has not.
        case exchanging(reading: Bool, responding: Bool, inputEnded: Bool)
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

    /// Why the channel does not read; it reads when there is no reason.
    struct Pauses: OptionSet, Sendable {
        let rawValue: UInt8
        /// The call paused its request body (the upstream cannot take more).
        static let call = Pauses(rawValue: 1)
        /// Bytes waiting behind an unanswered request reached their bound.
        static let waiting = Pauses(rawValue: 2)
    }

    private(set) var state = State.idle(inputEnded: false)
    private var pauses: Pauses = []

    var readsRequests: Bool { state != .discarding }

    /// Whether the next request part is handed to the call: its own body
    /// is, a pipelined request waits until the answer before it ended.
    var acceptsRequestParts: Bool {
        switch state {
        case .idle: true
        case .exchanging(let reading, let responding, _): reading || !responding
        case .discarding: false
        }
    }

    /// Whether the channel reads.
    var readOpen: Bool { pauses.isEmpty }

    /// A request head was read (before the call sees it: it may be answered at once).
    mutating func requestHead() {
        if case .idle(let inputEnded) = state { state = .exchanging(reading: true, responding: true, inputEnded: inputEnded) }
    }

    /// The request's end was read: the call has none of its body left to
    /// hold back (what comes next waits behind its answer). Returns whether
    /// the read gate changed.
    @discardableResult
    mutating func requestEnded() -> Bool {
        guard case .exchanging(true, let responding, let inputEnded) = state else { return false }
        state = responding ? .exchanging(reading: false, responding: true, inputEnded: inputEnded) : .idle(inputEnded: inputEnded)
        return pause(.call, false)
    }

    /// A malformed request: nothing after it can be trusted.
    mutating func malformed() { state = .discarding }

    /// The client stopped sending. `midRequest`: part of a request was read
    /// (it can never complete now).
    mutating func inputEnded(midRequest: Bool) -> Action {
        switch state {
        case .idle where !midRequest:
            state = .idle(inputEnded: true)
            return .parse
        case .exchanging(let reading, let responding, _) where !midRequest:
            state = .exchanging(reading: reading, responding: responding, inputEnded: true)
            return .parse
        case .idle, .exchanging, .discarding:
            state = .discarding
            return .close
        }
    }

    /// A pass over the waiting bytes ended: with nothing in flight, a client
    /// that stopped sending has had all its answers.
    mutating func idleAfterParse() -> Action {
        guard state == .idle(inputEnded: true) else { return .none }
        state = .discarding
        return .closeAfterWrites
    }

    /// A response ended. `unreadInput`: the client may still be sending (a
    /// request or body not read to its end); closing with bytes unread would
    /// reset the connection, and the reset can destroy the response before
    /// the client reads it — so the connection lingers.
    mutating func responseEnded(close: Bool, unreadInput: Bool) -> Action {
        let inputEnded: Bool
        switch state {
        case .idle(let ended):
            inputEnded = ended
        case .exchanging(let reading, _, let ended):
            inputEnded = ended
            if !close { state = reading ? .exchanging(reading: true, responding: false, inputEnded: ended) : .idle(inputEnded: ended) }
            // The call is over: the rest of its body is read (and dropped), never held back by it.
            pauses.remove(.call)
        case .discarding:
            // After a malformed request: its 400 closes the connection.
            inputEnded = false
        }
        guard close else { return .parse }
        state = .discarding
        guard !inputEnded, unreadInput else { return .closeAfterWrites }
        pauses = []
        return .lingerAfterWrites
    }

    /// The call pauses or resumes the request body. Returns whether the read gate changed.
    mutating func callWantsInput(_ on: Bool) -> Bool { pause(.call, !on) }

    /// Bytes waiting behind an unanswered request reached (or left) their bound.
    mutating func waiting(tooMuch: Bool) -> Bool { pause(.waiting, tooMuch) }

    private mutating func pause(_ reason: Pauses, _ on: Bool) -> Bool {
        let before = readOpen
        if on { pauses.insert(reason) } else { pauses.remove(reason) }
        return readOpen != before
    }
}
