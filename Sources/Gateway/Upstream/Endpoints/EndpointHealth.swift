/// Which of an upstream's endpoints may take calls, as a value: health-check
/// results and tries' outcomes in, state changes out (for the log and the
/// metrics). No clock of its own and no I/O: every event carries its time,
/// so the orderings are tested without sockets or sleeps.
struct EndpointHealth<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration, Instant: Sendable {
    struct Record: Sendable {
        /// What the active health check says (true until a check says otherwise).
        var healthy = true
        /// Checks in a row that disagree with `healthy`.
        var streak = 0
        var consecutiveFailures = 0
        var ejectedUntil: Instant?
        /// Ejections that still weigh (each lengthens the next); one is
        /// forgiven for every outlier interval spent in since the last.
        var ejections = 0
        var lastReturn: Instant?
        var totalEjections = 0
    }

    enum Change: Equatable, Sendable {
        case markedDown(Int)
        case markedUp(Int)
        case ejected(Int, for: Duration)
        case returned(Int)
        /// Every endpoint is down or ejected: calls go to all of them (true), or no longer (false).
        case panic(Bool)
    }

    private(set) var endpoints: [Record]
    let outlier: OutlierConfig?
    let healthCheck: HealthCheckConfig?
    private(set) var panicking = false

    init(count: Int, outlier: OutlierConfig?, healthCheck: HealthCheckConfig?, kept: [Int: Record] = [:]) {
        endpoints = (0..<count).map { kept[$0] ?? Record() }
        self.outlier = outlier
        self.healthCheck = healthCheck
    }

    func isAvailable(_ index: Int, now: Instant) -> Bool {
        let endpoint = endpoints[index]
        return endpoint.healthy && !(endpoint.ejectedUntil.map { now < $0 } ?? false)
    }

    /// The endpoints a call may go to now, as a bit set: the available ones,
    /// or all of them when none is (panic mode: better a call to a doubtful
    /// endpoint than none at all). Ejections that ran out end here.
    mutating func candidates(now: Instant, changes: inout [Change]) -> UInt64 {
        var available: UInt64 = 0
        for index in endpoints.indices {
            if let until = endpoints[index].ejectedUntil, now >= until {
                endpoints[index].ejectedUntil = nil
                endpoints[index].lastReturn = now
                changes.append(.returned(index))
            }
            if isAvailable(index, now: now) { available |= 1 << UInt64(index) }
        }
        let panic = available == 0
        if panic != panicking {
            panicking = panic
            changes.append(.panic(panic))
        }
        return panic ? EndpointPicker.all(endpoints.count) : available
    }

    /// A health check of `index` passed or failed.
    mutating func checked(_ index: Int, passed: Bool) -> Change? {
        guard let check = healthCheck else { return nil }
        var endpoint = endpoints[index]
        defer { endpoints[index] = endpoint }
        guard passed != endpoint.healthy else {
            endpoint.streak = 0
            return nil
        }
        endpoint.streak += 1
        guard endpoint.streak >= (passed ? check.healthyThreshold : check.unhealthyThreshold) else { return nil }
        endpoint.streak = 0
        endpoint.healthy = passed
        return passed ? .markedUp(index) : .markedDown(index)
    }

    /// A try on `index` ended; `failure`: what made it fail, nil when it did not.
    mutating func tryEnded(_ index: Int, failure: OutlierConfig.Failure?, now: Instant) -> Change? {
        guard let outlier else { return nil }
        guard let failure, outlier.on.contains(failure) else {
            endpoints[index].consecutiveFailures = 0
            return nil
        }
        endpoints[index].consecutiveFailures += 1
        guard endpoints[index].consecutiveFailures >= outlier.consecutiveFailures, !isEjected(index, now: now) else { return nil }
        // Never more than max_ejection_percent of the endpoints out at once.
        let out = endpoints.indices.filter { isEjected($0, now: now) }.count
        guard (out + 1) * 100 <= outlier.maxEjectionPercent * endpoints.count else { return nil }
        var endpoint = endpoints[index]
        if let lastReturn = endpoint.lastReturn {
            let forgiven = Int((lastReturn.duration(to: now) / outlier.interval).rounded(.down))
            endpoint.ejections = max(0, endpoint.ejections - forgiven)
        }
        endpoint.ejections += 1
        endpoint.totalEjections += 1
        endpoint.consecutiveFailures = 0
        let time = outlier.baseEjectionTime * endpoint.ejections
        endpoint.ejectedUntil = now.advanced(by: time)
        endpoints[index] = endpoint
        return .ejected(index, for: time)
    }

    func isEjected(_ index: Int, now: Instant) -> Bool {
        endpoints[index].ejectedUntil.map { now < $0 } ?? false
    }
}

/// Picking one endpoint of a candidate set, by the upstream's `balance`.
enum EndpointPicker {
    /// `candidates`: bits of the endpoints that may take the call;
    /// `exclude`: the endpoint the call's last try went to, skipped when
    /// another candidate exists; `counter`: round robin's position;
    /// `random`: a fresh random number; `inFlight`: calls on an endpoint now.
    static func pick(_ balance: Balance, candidates: UInt64, exclude: Int?, counter: Int, random: UInt64,
                     inFlight: (Int) -> Int) -> Int {
        var set = candidates
        if let exclude, set & ~(1 << UInt64(exclude)) != 0 { set &= ~(1 << UInt64(exclude)) }
        let count = set.nonzeroBitCount
        switch balance {
        case .roundRobin:
            return nth(set, counter % count)
        case .random:
            return nth(set, Int(random % UInt64(count)))
        case .leastRequest:
            // Power of two choices: two draws from one random number.
            let a = nth(set, Int((random & 0xFFFF_FFFF) % UInt64(count))), b = nth(set, Int((random >> 32) % UInt64(count)))
            return inFlight(b) < inFlight(a) ? b : a
        }
    }

    /// The bit set of all `count` endpoints (up to 64).
    static func all(_ count: Int) -> UInt64 { count >= 64 ? .max : (1 << UInt64(count)) - 1 }

    /// The index of the `n`th set bit (from 0).
    static func nth(_ set: UInt64, _ n: Int) -> Int {
        var rest = set
        for _ in 0..<n { rest &= rest - 1 }
        return rest.trailingZeroBitCount
    }
}
