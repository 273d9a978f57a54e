/// A route's `retry` section, compiled at load; immutable. The per-call state
/// that walks it lives with the forwarder.
public struct RetryPolicy: Sendable, Hashable {
    public enum Condition: Sendable, Hashable {
        /// A transport failure of this kind.
        case failure(UpstreamError.Kind)
        case status(ClosedRange<Int>)
    }

    public struct Backoff: Sendable, Hashable {
        public enum Strategy: String, Sendable, CaseIterable { case immediate, fixed, exponential, fibonacci }
        public var strategy: Strategy
        public var base: Duration
        public var max: Duration
        public var jitter: Bool
        public init(strategy: Strategy = .exponential, base: Duration = .milliseconds(25), max: Duration = .seconds(1), jitter: Bool = true) {
            self.strategy = strategy
            self.base = base
            self.max = max
            self.jitter = jitter
        }
    }

    /// Envoy-style retry budget: retries may be at most `ratio` of calls over
    /// `window`, but at least `minRetries` are always allowed.
    public struct Budget: Sendable, Hashable {
        public var ratio: Double
        public var window: Duration
        public var minRetries: Int
        /// `scope: fleet`: the calls and retries of every gatewayd on the store count together.
        public var scope = StoreScope.local
        public init(ratio: Double, window: Duration = .seconds(10), minRetries: Int = 3) {
            self.ratio = ratio
            self.window = window
            self.minRetries = minRetries
        }
    }

    public static let idempotentMethods = ["GET", "HEAD", "OPTIONS", "PUT", "DELETE"]
    public static let defaultConditions: [Condition] = [.failure(.connectFailure), .failure(.reset), .failure(.timeout), .failure(.refusedStream)]

    /// Tries in total, the first included.
    public var attempts: Int
    public var perTryTimeout: Duration?
    public var on: [Condition]
    public var methods: [String]
    public var backoff: Backoff
    public var honorRetryAfter: Bool
    public var budget: Budget?

    public init(
        attempts: Int = 2, perTryTimeout: Duration? = nil, on: [Condition] = RetryPolicy.defaultConditions,
        methods: [String] = RetryPolicy.idempotentMethods, backoff: Backoff = Backoff(), honorRetryAfter: Bool = false,
        budget: Budget? = nil
    ) {
        self.attempts = attempts
        self.perTryTimeout = perTryTimeout
        self.on = on
        self.methods = methods
        self.backoff = backoff
        self.honorRetryAfter = honorRetryAfter
        self.budget = budget
    }
}
