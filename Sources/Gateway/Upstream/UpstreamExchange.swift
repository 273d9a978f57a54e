import NIOHTTP1
import Rewriter

/// One try's exchange on an upstream connection or stream, as a value:
/// who gets the answer, how far the try got (what decides whether it may
/// be sent again), and whether a 101 answers what it asked. Both kinds of
/// connection keep one; an HTTP/1.1 connection's own machine
/// (`HTTP1UpstreamStateMachine`) is told at the end whether the request
/// was written whole, not kept a second time.
struct UpstreamExchange {
    enum State: Hashable {
        /// No try in flight.
        case idle
        /// A try began; nothing of its request went to the socket (or the
        /// session) yet. `requestComplete`: the whole request is known.
        case unsent(requestComplete: Bool)
        /// Inside the one write of a whole request: a close that happens in
        /// it was caused by that write failing, before any byte went out.
        case writing
        /// Some of the request went out; `requestComplete`: all of it.
        case sent(requestComplete: Bool)
        /// The answer's final head came.
        case responding(requestComplete: Bool)
    }

    /// What an answer's head means for the try.
    enum HeadVerdict {
        /// An interim answer (1xx): not forwarded, the final one follows.
        case interim
        case forward
        /// A 101 to the protocol the request asked for: the exchange is over,
        /// the connection carries the other protocol.
        case switched
        /// A switch no route asked for: the try fails (any other protocol,
        /// h2c say, would carry bytes past every route and rule).
        case refused(UpstreamError)
    }

    private(set) var state = State.idle
    private(set) var delegate: UpstreamResponseDelegate?
    /// Where the try is counted as in flight until the exchange ends.
    private var endpoint: Endpoint?
    /// The protocol the request asked to switch to (its one Upgrade token).
    private var upgrade: String?

    mutating func begin(_ delegate: UpstreamResponseDelegate, on endpoint: Endpoint, upgrade: String?) {
        _ = end()
        endpoint.tryStarted()
        self.delegate = delegate
        self.endpoint = endpoint
        self.upgrade = upgrade
        state = .unsent(requestComplete: false)
    }

    /// The whole request goes in one write, now.
    mutating func writing() {
        if case .unsent = state { state = .writing }
    }

    /// (Some of) the request was handed to the socket or the session.
    mutating func written() {
        switch state {
        case .writing: state = .sent(requestComplete: true)
        case .unsent(let complete): state = .sent(requestComplete: complete)
        case .idle, .sent, .responding: break
        }
    }

    /// The request's last byte is known (and, once written, out).
    mutating func requestCompleted() {
        switch state {
        case .unsent: state = .unsent(requestComplete: true)
        case .sent: state = .sent(requestComplete: true)
        case .responding: state = .responding(requestComplete: true)
        case .idle, .writing: break
        }
    }

    var progress: TryProgress {
        switch state {
        case .idle, .unsent, .writing: .unsent
        case .sent: .sent
        case .responding: .responseStarted
        }
    }

    /// An answer's head arrived.
    mutating func headArrived(_ head: ResponseHead, from upstream: String) -> HeadVerdict {
        let code = head.status.code
        if code == 101 {
            guard let asked = upgrade else {
                return .refused(.reset("upstream \(upstream) answered 101", summary: "it switched protocols, which is not forwarded"))
            }
            let offered = head.headers.listItems("Upgrade")
            guard offered.count == 1, HeaderList.equalNames(String(offered[0]), asked) else {
                return .refused(.reset("upstream \(upstream) switched to '\(offered.joined(separator: ", "))' where '\(asked)' was asked",
                                       summary: "it switched to a protocol that was not asked for"))
            }
            _ = end()
            return .switched
        }
        guard code >= 200 else { return .interim }
        switch state {
        case .unsent(let complete), .sent(let complete), .responding(let complete): state = .responding(requestComplete: complete)
        case .writing: state = .responding(requestComplete: true)
        case .idle: break
        }
        return .forward
    }

    /// Ends the exchange. Returns its delegate, still to be told how, and
    /// whether its request was written whole (a connection whose request
    /// body was cut short has broken framing).
    mutating func end() -> (delegate: UpstreamResponseDelegate?, requestComplete: Bool) {
        let complete = switch state {
        case .sent(let complete), .responding(let complete): complete
        case .idle, .unsent, .writing: false
        }
        endpoint?.tryFinished()
        endpoint = nil
        upgrade = nil
        state = .idle
        defer { delegate = nil }
        return (delegate, complete)
    }
}
