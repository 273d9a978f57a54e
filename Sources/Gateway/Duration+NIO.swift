import NIOCore

extension Duration {
    /// Whole nanoseconds (sub-nanosecond parts dropped).
    var nanosecondCount: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    /// In seconds, fractions included.
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }

    /// The same span as NIO's timer type.
    var timeAmount: TimeAmount { .nanoseconds(nanosecondCount) }
}
