/// `routes[].rate_limit`: a token bucket per key, shared by all event
/// loops. A key may make `requests` calls per `per`, refilled continuously,
/// and save up to `burst` more while quiet.
public struct RateLimitConfig: Sendable, Hashable {
    public enum Key: Sendable, Hashable {
        /// The client's address (the TCP peer).
        case clientIP
        /// A request header's value (every call without it shares one bucket).
        case header(String)
    }

    public var requests: Int
    public var per: Duration
    public var burst = 0
    public var key = Key.clientIP
    /// Keys tracked at once (memory bound); past it, idle keys are dropped first.
    public var maxKeys = 100_000

    public init(requests: Int, per: Duration) {
        self.requests = requests
        self.per = per
    }

    /// The bucket's size: a quiet key may spend this many calls at once.
    var capacity: Double { Double(requests + burst) }
    /// Tokens per second.
    var rate: Double { Double(requests) / per.seconds }
}
