/// `routes[].rate_limit`: a token bucket per key, shared by all event
/// loops. A key may make `requests` calls per `per`, refilled continuously,
/// and save up to `burst` more while quiet.
public struct RateLimitConfig: Sendable, Hashable {
    /// `key`: what tells callers apart, each with a bucket of its own.
    public enum Key: Sendable, Hashable {
        /// The client's address (the TCP peer).
        case clientIP
        /// A request header's value (every call without it shares one bucket).
        case header(String)
    }

    /// `on_store_failure`: what a fleet limit does while the store is down.
    public enum OnStoreFailure: String, Sendable, Hashable, CaseIterable {
        /// This process's own buckets decide.
        case local
        /// Every call is refused (429) until the store is back.
        case deny
    }

    /// `requests`: calls allowed per `per`.
    public var requests: Int
    /// `per`: the span `requests` is counted over.
    public var per: Duration
    /// `burst`: calls a quiet key may save up beyond `requests`.
    public var burst = 0
    /// `key`: `client_ip` or `header:NAME`.
    public var key = Key.clientIP
    /// Keys tracked at once (memory bound); past it, idle keys are dropped first.
    public var maxKeys = 100_000
    /// `scope`: this process's own buckets, or the fleet's (in the store).
    public var scope = StoreScope.local
    /// `lease`: calls a process takes from the fleet's bucket at a time;
    /// nil for a tenth of the bucket.
    public var lease: Int?
    /// `on_store_failure`: `local` or `deny`.
    public var onStoreFailure = OnStoreFailure.local

    /// `requests` per `per`, per client address, no burst.
    public init(requests: Int, per: Duration) {
        self.requests = requests
        self.per = per
    }

    /// The bucket's size: a quiet key may spend this many calls at once.
    var capacity: Double { Double(requests + burst) }
    /// What a process leases at a time (and may admit ahead of the fleet's bucket).
    var leaseSize: Int { lease ?? max(1, Int(capacity / 10)) }
    /// Tokens per second.
    var rate: Double { Double(requests) / per.seconds }
}
