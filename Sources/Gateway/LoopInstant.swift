import NIOCore

/// The event loop's clock as the state machines' instant: the deadlines they
/// keep are the ones the loop's timers wake at, with no conversion between clocks.
struct LoopInstant: InstantProtocol {
    let deadline: NIODeadline

    static var now: LoopInstant { LoopInstant(deadline: .now()) }

    func advanced(by duration: Duration) -> LoopInstant { LoopInstant(deadline: deadline + duration.timeAmount) }

    func duration(to other: LoopInstant) -> Duration {
        .nanoseconds(Int64(other.deadline.uptimeNanoseconds) &- Int64(deadline.uptimeNanoseconds))
    }

    static func < (lhs: LoopInstant, rhs: LoopInstant) -> Bool { lhs.deadline < rhs.deadline }
}
