import NIOCore
import NIOHTTP1

/// Where one HTTP/2 server stream is, as a value: events in, what to do
/// with the stream out, no I/O. A stream carries one exchange — its header
/// block, its request body, its answer — or, after an extended CONNECT
/// (RFC 8441) the upstream switched, a tunnel. The request's and the
/// answer's sides move apart (RFC 9113 §8.1: an answer may end before its
/// request); both are in the state's cases. What waits to go out (the
/// held head, the body's queue, the trailers) and the request's flow
/// control are kept beside them, the queue and flow control in the
/// embedded `HTTP2StreamState`.
struct HTTP2ServerStreamStateMachine {
    enum State {
        /// The request's header block is arriving.
        case receivingHeaders
        /// A request and its answer.
        case exchanging(Request, Response)
        /// An extended CONNECT whose upstream has not switched yet: DATA
        /// that comes is kept, to go through the tunnel first.
        case awaitingSwitch(early: [ByteBuffer], Response)
        /// The upstream switched: the stream's DATA is the tunnel's, both ways.
        case tunnel(Response)
        /// Reset, or over: writes go nowhere, DATA only reopens the window.
        case closed
    }

    /// The request after its head.
    enum Request: Hashable {
        /// Its body comes, part by part, to the call.
        case reading
        /// The answer ended first and closes: what still comes is read and
        /// dropped until the linger time ends (then RST_STREAM(NO_ERROR)).
        case lingering
        /// END_STREAM came.
        case ended
    }

    /// The answer's head: none yet, held until a flush (so an answer known
    /// whole goes as HEADERS with END_STREAM, and no empty DATA), or handed
    /// to libnghttp2. (The held head and the trailers are the answer's
    /// bytes waiting to go, kept in `outbound` beside its body's queue: the
    /// state stays small, and it is copied on every event.)
    enum Response: Hashable {
        case pending
        case held
        case submitted
    }

    /// Where a DATA frame's bytes go.
    enum DataDestination: Hashable {
        /// Nowhere: only the windows reopen.
        case drop
        case call
        /// Kept for the tunnel still to come (`keepEarly`).
        case early
        case tunnel
    }

    /// What the request's END_STREAM means for the stream.
    enum RequestEndAction: Hashable {
        case none
        /// Tell the call its request ended.
        case tellCall
        /// The client ended its side of the tunnel.
        case closeTunnel
        /// A CONNECT's client left before the switch: the stream is reset.
        case cancel
    }

    /// What a flush hands libnghttp2.
    enum SubmitAction {
        case none
        /// The head; `body`: DATA or trailers follow.
        case submit(ResponseHead, body: Bool)
        /// A deferred stream has more body (or its end) to send.
        case resume
    }

    /// What the answer's end does to the stream.
    enum ResponseEndAction: Hashable {
        case none
        case flush
        /// Flush, then read and drop the rest of the request for the linger time.
        case flushThenLinger
    }

    private(set) var state = State.receivingHeaders
    /// The answer's body queue and the request's flow control.
    private(set) var flow = HTTP2StreamState()
    /// The held head, and the trailers until the answer's last DATA.
    private var outbound: (head: ResponseHead?, trailers: HTTPHeaders?) = (nil, nil)
    /// The exchange as the call's side sees it (its waits, its record
    /// written once): moved here as the request is read.
    var exchange = ExchangeStateMachine<LoopInstant>()

    var isOpen: Bool {
        if case .closed = state { false } else { true }
    }

    /// Only an extended CONNECT waiting for its switch becomes a tunnel.
    var canTunnel: Bool {
        if case .awaitingSwitch = state { true } else { false }
    }

    private var requestDone: Bool {
        if case .exchanging(.ended, _) = state { true } else { false }
    }

    private var responseEnded: Bool { flow.sendingEnded }

    // MARK: The request

    /// The header block is complete. `connect`: an extended CONNECT, whose
    /// DATA is the tunnel's; `ended`: the request is over without the call
    /// being told (a block refused whole).
    mutating func headersEnded(connect: Bool, ended: Bool = false) {
        guard case .receivingHeaders = state else { return }
        exchange.requestHead()
        // An extended CONNECT's HTTP request is its head alone.
        if connect || ended { exchange.requestEnded() }
        guard connect else { return state = .exchanging(ended ? .ended : .reading, .pending) }
        state = .awaitingSwitch(early: [], .pending)
        // What comes before the switch is kept unconsumed: the stream's
        // window bounds it, however long the upstream takes.
        _ = flow.setReading(false)
    }

    /// DATA arrived: where its bytes go and how many to consume (reopen the
    /// windows for) now — all of them unless the reader paused.
    mutating func received(_ count: Int) -> (DataDestination, consume: Int) {
        let destination: DataDestination = switch state {
        case .exchanging(.reading, _): .call
        // A CONNECT answered without a switch: nothing is kept for a tunnel that never comes.
        case .awaitingSwitch: responseEnded ? .drop : .early
        case .tunnel: .tunnel
        case .receivingHeaders, .exchanging, .closed: .drop
        }
        guard destination != .drop else { return (.drop, count) }
        return (destination, flow.received(count))
    }

    /// Keeps DATA that came before the switch.
    mutating func keepEarly(_ buffer: ByteBuffer) {
        guard case .awaitingSwitch(var early, let response) = state else { return }
        state = .closed
        early.append(buffer)
        state = .awaitingSwitch(early: early, response)
    }

    /// The request's END_STREAM.
    mutating func requestEnded() -> RequestEndAction {
        switch state {
        case .exchanging(let request, let response) where request != .ended:
            state = .exchanging(.ended, response)
            exchange.requestEnded()
            // A lingering stream's call has its answer already.
            return request == .reading ? .tellCall : .none
        case .awaitingSwitch:
            return .cancel
        case .tunnel:
            return .closeTunnel
        case .receivingHeaders, .exchanging, .closed:
            return .none
        }
    }

    /// The upstream switched: the DATA that came before, to go through
    /// first, and how many bytes to consume now (nil: this stream is no
    /// extended CONNECT waiting).
    mutating func switched() -> (early: [ByteBuffer], consume: Int)? {
        guard case .awaitingSwitch(let early, let response) = state else { return nil }
        state = .tunnel(response)
        return (early, flow.setReading(true))
    }

    /// The reader pauses or resumes: how many bytes to consume now.
    mutating func setReading(_ on: Bool) -> Int { flow.setReading(on) }

    // MARK: The answer

    /// The answer's head. Returns an interim head (100 Continue) to send at
    /// once, as its own HEADERS; a final one is held until the flush.
    mutating func writeHead(_ head: ResponseHead) -> ResponseHead? {
        guard isOpen, !responseEnded else { return nil }
        if head.status.code == 101, isConnect {
            // RFC 8441 §5: the switch is a 200 on the stream, without the HTTP/1.1 upgrade's fields.
            var accepted = head
            accepted.status = .ok
            for name in ["Upgrade", "Connection", "Sec-WebSocket-Accept"] { accepted.headers.remove(name) }
            hold(accepted)
            return nil
        }
        // HTTP/2 has no 101 (RFC 9113 §8.1): only a CONNECT's switch, above, answers one.
        guard head.status.code != 101 else { return nil }
        guard head.status.code >= 200 else { return head }
        hold(head)
        return nil
    }

    private mutating func hold(_ head: ResponseHead) {
        outbound.head = head
        setResponse(.held)
    }

    private var isConnect: Bool {
        switch state {
        case .awaitingSwitch, .tunnel: true
        case .receivingHeaders, .exchanging, .closed: false
        }
    }

    mutating func writeBody(_ buffer: ByteBuffer) {
        guard isOpen, !responseEnded else { return }
        flow.send(buffer)
    }

    /// The answer's end, with its trailers.
    mutating func writeEnd(trailers: HTTPHeaders?) -> ResponseEndAction {
        if let trailers, isOpen, !responseEnded, response == .held || response == .submitted { outbound.trailers = trailers }
        return responseEnded(close: false)
    }

    /// The answer ended. `close`: the call wants the stream done; if the
    /// request still comes, the stream lingers (some clients — curl 7.88 —
    /// fail a call whose stream is reset, even after a whole answer).
    mutating func responseEnded(close: Bool) -> ResponseEndAction {
        guard isOpen, !responseEnded else { return .none }
        flow.endSending()
        guard close else { return .flush }
        switch state {
        case .exchanging(.reading, let response), .awaitingSwitch(_, let response), .tunnel(let response):
            state = .exchanging(.lingering, response)
            return .flushThenLinger
        case .receivingHeaders, .exchanging, .closed:
            return .flush
        }
    }

    /// What a flush hands libnghttp2: the held head (with no DATA at all when
    /// the whole answer is a head), or more body for a deferred stream.
    mutating func submit() -> SubmitAction {
        switch response {
        case .held:
            setResponse(.submitted)
            guard let head = outbound.head.take() else { return .none }
            return .submit(head, body: !(responseEnded && flow.outbound.isEmpty && outbound.trailers == nil))
        case .submitted where !flow.outbound.isEmpty || responseEnded:
            return flow.resumeNeeded() ? .resume : .none
        case .submitted, .pending, nil:
            return .none
        }
    }

    /// libnghttp2 asks for up to `buffer.count` bytes of DATA. Returns what
    /// was read and, with the last bytes, the trailers to send after them.
    mutating func read(into buffer: UnsafeMutableRawBufferPointer) -> (HTTP2StreamState.Read, trailers: HTTPHeaders?) {
        let read = flow.read(into: buffer)
        guard case .bytes(_, end: true) = read, response == .submitted else { return (read, nil) }
        return (read, outbound.trailers.take())
    }

    /// The linger time is over. Returns whether the stream is to be reset
    /// (RST_STREAM(NO_ERROR)): the request still had not ended.
    func lingerEnded() -> Bool {
        if case .exchanging(.lingering, _) = state { true } else { false }
    }

    /// The call gives the stream up. Returns whether it is to be reset
    /// (RST_STREAM(CANCEL)): it is open and not both sides ended.
    mutating func cancel() -> Bool {
        guard isOpen, !(responseEnded && requestDone) else { return false }
        flow.cancel()
        outbound = (nil, nil)
        state = .closed
        return true
    }

    /// The stream is over (both sides ended, reset, or the connection
    /// went). Returns the bytes received and never consumed, which still
    /// count against the connection's window.
    mutating func closed() -> Int {
        state = .closed
        outbound = (nil, nil)
        return flow.closed()
    }

    private var response: Response? {
        switch state {
        case .exchanging(_, let response), .awaitingSwitch(_, let response), .tunnel(let response): response
        case .receivingHeaders, .closed: nil
        }
    }

    private mutating func setResponse(_ response: Response) {
        switch state {
        case .exchanging(let request, _): state = .exchanging(request, response)
        case .awaitingSwitch(let early, _): state = .awaitingSwitch(early: early, response)
        case .tunnel: state = .tunnel(response)
        case .receivingHeaders, .closed: break
        }
    }
}
