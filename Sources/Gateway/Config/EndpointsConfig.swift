/// How an upstream with several endpoints spreads calls over them.
public enum Balance: String, Sendable, Hashable, CaseIterable {
    case roundRobin = "round_robin"
    /// Power of two choices: of two endpoints drawn at random, the one with
    /// fewer calls in flight (as Envoy's LEAST_REQUEST).
    case leastRequest = "least_request"
    case random
}

/// `upstreams.*.health_check`: a request sent to every endpoint every
/// `interval`, from one place for the whole process; an endpoint is down
/// after `unhealthyThreshold` failed checks in a row, up again after
/// `healthyThreshold` passed ones. A check passes when the status is in
/// `expect` and no validator of `validate` says fail or retry.
public struct HealthCheckConfig: Sendable, Hashable {
    /// `path`: what each check requests (with the endpoint's base path and query).
    public var path = "/"
    /// `method`: the check's method.
    public var method = "GET"
    /// `interval`: how often every endpoint is checked.
    public var interval = Duration.seconds(5)
    /// `timeout`: a check unanswered this long fails.
    public var timeout = Duration.seconds(1)
    /// `healthy_threshold`: passed checks in a row that bring a down endpoint back.
    public var healthyThreshold = 2
    /// `unhealthy_threshold`: failed checks in a row that take an endpoint down.
    public var unhealthyThreshold = 3
    /// `expect`: the statuses that pass (`200-299` by default).
    public var expect: [ClosedRange<Int>] = [200...299]
    /// `validate`: validators over the check's answer; `fail` or `retry` fails the check.
    public var validate: [ValidatorSpec] = []
    /// A check of `GET /` every 5 s with the defaults above.
    public init() {}
}

/// `upstreams.*.outlier`: passive detection from the calls themselves. An
/// endpoint whose last `consecutiveFailures` tries all failed (by `on`) is
/// ejected for `baseEjectionTime` times the number of its ejections (one
/// less for every `interval` it then stays in), while at most
/// `maxEjectionPercent` of the endpoints are out at once.
public struct OutlierConfig: Sendable, Hashable {
    /// What counts as a failed try.
    public enum Failure: String, Sendable, Hashable, CaseIterable {
        case connectFailure = "connect-failure"
        case reset, timeout
        case status5xx = "5xx"
        /// An answer the route's validators refused (`fail` or `retry`): a
        /// `200 {"error": ...}` a status-only rule lets through.
        case validator

        /// How a failed try counts (a refused stream is the upstream's polite "not now": it does not).
        init?(_ kind: UpstreamError.Kind) {
            switch kind {
            case .connectFailure: self = .connectFailure
            case .reset: self = .reset
            case .timeout: self = .timeout
            default: return nil
            }
        }
    }

    /// `consecutive_failures`: failed tries in a row that eject an endpoint.
    public var consecutiveFailures = 5
    /// `interval`: how often an ejection's count is lowered while the endpoint stays in.
    public var interval = Duration.seconds(10)
    /// `base_ejection_time`: the first ejection's length; each next is longer by as much.
    public var baseEjectionTime = Duration.seconds(30)
    /// `max_ejection_percent`: at most this share of the endpoints is ejected at once.
    public var maxEjectionPercent = 50
    /// `on`: the failures that count (all five by default).
    public var on: Set<Failure> = Set(Failure.allCases)
    /// Outlier detection with the defaults above.
    public init() {}
}
