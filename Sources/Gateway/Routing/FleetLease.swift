/// One key's share of a fleet-wide bucket in this process, as a value
/// (events in, decisions out; the refill's round trip is the caller's).
///
/// Calls spend tokens leased from the fleet's bucket. When half a lease is
/// spent, a refill for a whole lease is asked, while calls go on. A key with
/// nothing leased (its first call here, or a lease spent before the refill
/// came back) is admitted on credit, up to one lease; the refill charges the
/// credit to the fleet's bucket first, even past empty, so the fleet pays it
/// back in later refusals. The fleet is therefore never more than one lease
/// per process ahead of its limit. A call waits for the store only when it
/// finds the lease and its credit spent with a refill out: once, for that
/// refill's answer (the store's `timeout` at most).
struct FleetLease: Sendable {
    /// A refill in flight: the credit it charges and the tokens it asks for.
    /// `id` ties its answer to it (an answer to an older one is ignored).
    struct Refill: Sendable, Equatable {
        var id: UInt64
        var charged: Int
        var wanted: Int
    }

    enum Decision: Equatable {
        /// Admitted; `refill` is to be sent to the store.
        case allowed(refill: Refill?)
        /// Refused: the next token is this many seconds away.
        case refused(wait: Double, refill: Refill? = nil)
        /// Lease and credit spent, the store not known to be down: the call
        /// is decided again once the refill with id `for` has its answer
        /// (`refill`, when not nil, is to be sent first).
        case waits(for: UInt64, refill: Refill?)
        /// The store did not answer the last refill: the route's
        /// `on_store_failure` decides, and `refill` asks again.
        case unanswered(refill: Refill?)

        /// The refill to send, if any.
        var refill: Refill? {
            switch self {
            case .allowed(let refill), .refused(_, let refill), .unanswered(let refill), .waits(_, let refill): refill
            }
        }
    }

    /// The longest a store's answer may make a key wait (an hour): past it, a hostile or broken reply.
    static let longestWait = 3600.0

    private(set) var tokens = 0
    private(set) var credit = 0
    private(set) var inFlight: Refill?
    /// The last refill got no answer.
    private var unanswered = false
    /// The fleet's bucket was empty: refused until then once the lease is spent.
    private var emptyUntil = 0.0
    private var lastUsed: Double

    init(now: Double) { lastUsed = now }

    /// `mayWait`: false for a call that has waited once already (it is refused instead).
    mutating func take(now: Double, size: Int, rate: Double, nextID: UInt64, mayWait: Bool = true) -> Decision {
        lastUsed = now
        if tokens > 0 {
            tokens -= 1
            return .allowed(refill: tokens * 2 < size ? startRefill(size: size, id: nextID) : nil)
        }
        if now < emptyUntil { return .refused(wait: emptyUntil - now) }
        // The store failed the last refill: no credit on its word until it answers again.
        if unanswered { return .unanswered(refill: startRefill(size: size, id: nextID)) }
        // A spent lease whose refill is late: credit until it answers.
        guard credit < size else {
            let refill = startRefill(size: size, id: nextID)
            if mayWait, let out = inFlight { return .waits(for: out.id, refill: refill) }
            return .refused(wait: Double(size) / rate, refill: refill)
        }
        credit += 1
        return .allowed(refill: startRefill(size: size, id: nextID))
    }

    /// The store's answer to `refill`: `got` tokens leased (at most the ones
    /// wanted), and when `got` fell short, `wait` seconds until the next one.
    mutating func granted(_ refill: Refill, got: Int, wait: Double, now: Double) {
        guard inFlight == refill else { return }
        inFlight = nil
        unanswered = false
        credit -= refill.charged
        // The store's word is bounded by what was asked: a hostile reply cannot lease more, or trap the sum.
        let got = min(max(got, 0), refill.wanted)
        tokens += got
        if got < refill.wanted { emptyUntil = now + min(max(wait, 0), Self.longestWait) }
    }

    /// The refill got no answer: its credit stays, to be charged by the next one.
    mutating func failed(_ refill: Refill) {
        guard inFlight == refill else { return }
        inFlight = nil
        unanswered = true
    }

    /// Nothing leased, owed or asked, and quiet for a lease's worth of time:
    /// forgetting it changes nothing the fleet's bucket does not already know.
    func isIdle(now: Double, size: Int, rate: Double) -> Bool {
        inFlight == nil && credit == 0 && now >= emptyUntil && now - lastUsed >= Double(size) / rate
    }

    private mutating func startRefill(size: Int, id: UInt64) -> Refill? {
        guard inFlight == nil else { return nil }
        let refill = Refill(id: id, charged: credit, wanted: size)
        inFlight = refill
        return refill
    }
}
