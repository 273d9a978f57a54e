import NIOCore

/// One scheduled wake-up, re-armed lazily: asking for a time at or after
/// the pending one changes nothing (whoever wakes checks its own deadlines
/// and asks again), only an earlier time replaces it. A call moves its
/// deadline several times; this schedules about once per timeout period
/// per connection instead of a schedule and a cancel per call or stream.
struct LazyTimer {
    private var scheduled: NIOScheduledCallback?
    private var pendingAt: NIODeadline?

    mutating func wake(at when: NIODeadline, on eventLoop: EventLoop, handler: some NIOScheduledCallbackHandler) {
        if let pendingAt, pendingAt <= when { return }
        scheduled?.cancel()
        pendingAt = when
        scheduled = try? eventLoop.assumeIsolated().scheduleCallback(at: when, handler: handler)
    }

    /// Called first thing when the wake-up comes.
    mutating func fired() {
        scheduled = nil
        pendingAt = nil
    }

    /// The owner closes: nothing holds it until the wake-up.
    mutating func cancel() {
        scheduled?.cancel()
        fired()
    }
}
