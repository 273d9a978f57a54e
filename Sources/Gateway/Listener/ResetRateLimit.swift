import NIOCore

/// Rapid reset (CVE-2023-44487): a client that resets more than `limit`
/// streams within `window` is told to calm down and cut off. Counted here
/// rather than by swift-nio-http2, whose GOAWAY for it names stream 0 as the
/// last one processed; ours names the last stream the gateway did act on
/// (RFC 9113 §6.8), so a client knows which of its requests may have run.
struct ResetRateLimit {
    static let limit = 200
    static let window = TimeAmount.seconds(30)

    private var windowStart = NIODeadline.distantPast
    private var count = 0

    /// A RST_STREAM arrived at `now`: whether the rate is now too high.
    mutating func reset(at now: NIODeadline) -> Bool {
        if now - windowStart >= Self.window {
            windowStart = now
            count = 0
        }
        count += 1
        return count > Self.limit
    }
}
