/// A route's `retry` section, compiled at load; immutable. The per-call state
/// that walks it is the call's (`RetryState`).
public struct RetryPolicy: Sendable, Hashable {
    /// An entry of `retry.on`: what makes a try worth sending again.
    public enum Condition: Sendable, Hashable {
        /// A transport failure of this kind.
        case failure(UpstreamError.Kind)
        /// An upstream status in this range.
        case status(ClosedRange<Int>)
    }

    /// `retry.backoff`: the wait before each retry.
    public struct Backoff: Sendable, Hashable {
        /// How the wait grows from one retry to the next.
        public enum Strategy: String, Sendable, CaseIterable { case immediate, fixed, exponential, fibonacci }
        /// `strategy`: how the wait grows from one retry to the next.
        public var strategy: Strategy
        /// `base`: the first wait.
        public var base: Duration
        /// `max`: no wait is longer.
        public var max: Duration
        /// `jitter`: an exponential wait is drawn between zero and its value (full jitter).
        public var jitter: Bool
        /// An exponential backoff from 25 ms up to 1 s, with jitter.
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
        /// `ratio`: retries per call over the window (0.2: one retry per five calls).
        public var ratio: Double
        /// `window`: the span over which calls and retries are counted.
        public var window: Duration
        /// `min_retries`: retries always allowed in a window, whatever the ratio.
        public var minRetries: Int
        /// `scope: fleet`: the calls and retries of every gatewayd on the store count together.
        public var scope = StoreScope.local
        /// A budget of `ratio` with the defaults above.
        public init(ratio: Double, window: Duration = .seconds(10), minRetries: Int = 3) {
            self.ratio = ratio
            self.window = window
            self.minRetries = minRetries
        }
    }

    /// The methods retried by default: those RFC 9110 calls idempotent, less TRACE.
    public static let idempotentMethods = ["GET", "HEAD", "OPTIONS", "PUT", "DELETE"]
    /// What `retry.on` holds by default: failures where the upstream cannot have acted on the request.
    public static let defaultConditions: [Condition] = [.failure(.connectFailure), .failure(.reset), .failure(.timeout), .failure(.refusedStream)]

    /// Tries in total, the first included.
    public var attempts: Int
    /// `per_try_timeout`: a try unanswered this long fails (and may be retried).
    public var perTryTimeout: Duration?
    /// `on`: the failures and statuses that are retried.
    public var on: [Condition]
    /// `methods`: the methods that may be retried.
    public var methods: [String]
    /// `backoff`: the wait before each retry.
    public var backoff: Backoff
    /// `honor_retry_after`: an upstream's `Retry-After` sets the wait, within the call's deadline.
    public var honorRetryAfter: Bool
    /// `budget`: caps retries to a share of calls (Envoy's retry budget).
    public var budget: Budget?

    /// A policy of `attempts` tries with the defaults above.
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
