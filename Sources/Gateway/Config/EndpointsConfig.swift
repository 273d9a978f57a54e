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
    public var path = "/"
    public var method = "GET"
    public var interval = Duration.seconds(5)
    public var timeout = Duration.seconds(1)
    public var healthyThreshold = 2
    public var unhealthyThreshold = 3
    public var expect: [ClosedRange<Int>] = [200...299]
    public var validate: [ValidatorSpec] = []
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

    public var consecutiveFailures = 5
    public var interval = Duration.seconds(10)
    public var baseEjectionTime = Duration.seconds(30)
    public var maxEjectionPercent = 50
    public var on: Set<Failure> = Set(Failure.allCases)
    public init() {}
}
