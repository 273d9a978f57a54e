/// The byte side of one HTTP/1.1 client connection as a value: whether it
/// reads requests at all (after a malformed one, or while closing, input is
/// dropped), whether the client still sends, whether the channel reads
/// (back-pressure), and how the connection ends — at once, once its writes
/// are out, or lingering (nginx's lingering close). Where its exchange is
/// (waiting for a head, a request read, its answer written) is the embedded
/// `ExchangeStateMachine`, the one the call's side (`ClientExchange`) moves
/// through `ClientSide.exchange`, as async-http-client embeds its request's
/// machine in its connection's. Keep-alive and pipelining follow from it:
/// the next request is read only once the answer before it ended.
struct HTTP1ConnectionStateMachine: Sendable {
    enum State: Hashable, Sendable {
        /// Requests are read. `inputEnded`: the client closed its sending
        /// side (RFC 9112 section 9.6); what it sent is still read and
        /// answered, then the connection closes.
        case open(inputEnded: Bool)
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

    private(set) var state = State.open(inputEnded: false)
    /// Where the exchange is, and the client-side waits.
    var exchange = ExchangeStateMachine<LoopInstant>()
    private var pauses: Pauses = []

    var readsRequests: Bool { state != .discarding }

    /// Whether the next request part is handed to the call: its own body
    /// is, a pipelined request waits until the answer before it ended.
    var acceptsRequestParts: Bool {
        guard state != .discarding else { return false }
        return switch exchange.phase {
        case .awaitingHead: true
        case .exchanging(let reading, let responding, _): reading || !responding
        case .closed: false
        }
    }


    /// Whether the channel reads.
    var readOpen: Bool { pauses.isEmpty }

    /// A request head was read (before the call sees it: it may be answered at once).
    mutating func requestHead() {
        if case .open = state, exchange.isIdle { exchange.requestHead() }
    }

    /// The request's end was read: the call has none of its body left to
    /// hold back (what comes next waits behind its answer). Returns whether
    /// the read gate changed.
    @discardableResult
    mutating func requestEnded() -> Bool {
        guard case .exchanging(reading: true, _, _) = exchange.phase else { return false }
        exchange.requestEnded()
        return pause(.call, false)
    }

    /// A malformed request: nothing after it can be trusted.
    mutating func malformed() { state = .discarding }

    /// The client stopped sending. `midRequest`: part of a request was read
    /// (it can never complete now).
    mutating func inputEnded(midRequest: Bool) -> Action {
        guard case .open = state, !midRequest else {
            state = .discarding
            return .close
        }
        state = .open(inputEnded: true)
        return .parse
    }

    /// A pass over the waiting bytes ended: with nothing in flight, a client
    /// that stopped sending has had all its answers.
    mutating func idleAfterParse() -> Action {
        guard state == .open(inputEnded: true), exchange.isIdle else { return .none }
        state = .discarding
        return .closeAfterWrites
    }

    /// A response ended (the exchange has heard of it: `ClientExchange`
    /// ends it first). `unreadInput`: the client may still be sending (a
    /// request or body not read to its end); closing with bytes unread would
    /// reset the connection, and the reset can destroy the response before
    /// the client reads it — so the connection lingers.
    mutating func responseEnded(close: Bool, unreadInput: Bool) -> Action {
        let inputEnded: Bool
        switch state {
        case .open(let ended):
            inputEnded = ended
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
