import NIOCore

/// Frames a client may send at no cost to itself but some to us (resets of
/// streams it just opened, CVE-2023-44487; empty DATA, CVE-2019-9518): more
/// than `limit` within `window` and the connection is told to calm down.
struct FloodLimit {
    let limit: Int
    let window: TimeAmount
    private var windowStart = NIODeadline.distantPast
    private var count = 0

    init(limit: Int, window: TimeAmount) {
        self.limit = limit
        self.window = window
    }

    /// One more such frame at `now`: whether the rate is now too high.
    mutating func record(at now: NIODeadline) -> Bool {
        if now - windowStart >= window {
            windowStart = now
            count = 0
        }
        count += 1
        return count > limit
    }
}
