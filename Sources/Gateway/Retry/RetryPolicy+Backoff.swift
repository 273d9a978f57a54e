extension RetryPolicy.Backoff {
    /// The delay before retry `n` (1 for the first retry): `immediate` 0,
    /// `fixed` base, `exponential` min(max, base·2^(n-1)), `fibonacci`
    /// min(max, base·fib(n)); `exponential` with `jitter` (its default) is a
    /// uniform pick in [0, delay] (full jitter); the others wait exactly.
    /// Pure: randomness is injected.
    public func delay(forRetry n: Int, random: inout some RandomNumberGenerator) -> Duration {
        let n = Swift.max(1, n)
        let planned: Duration
        switch strategy {
        case .immediate: return .zero
        case .fixed: planned = base
        case .exponential: planned = Self.capped(base, times: n >= 63 ? .max : 1 << (n - 1), max: max)
        case .fibonacci: planned = Self.capped(base, times: Self.fibonacci(n), max: max)
        }
        guard jitter, strategy == .exponential, planned > .zero else { return planned }
        let nanos = planned.nanosecondCount
        return .nanoseconds(Int64.random(in: 0...nanos, using: &random))
    }

    private static func capped(_ base: Duration, times factor: Int64, max: Duration) -> Duration {
        let (product, overflow) = base.nanosecondCount.multipliedReportingOverflow(by: factor)
        return overflow ? max : Swift.min(max, .nanoseconds(product))
    }

    static func fibonacci(_ n: Int) -> Int64 {
        var (a, b): (Int64, Int64) = (1, 1)
        for _ in 1..<n {
            let (sum, overflow) = a.addingReportingOverflow(b)
            if overflow { return .max }
            (a, b) = (b, sum)
        }
        return a
    }
}
