import NIOCore

extension Duration {
    /// Whole nanoseconds (sub-nanosecond parts dropped). One division of the
    /// attoseconds: `components` took ~6 times the instructions (a 128-bit
    /// division and multiplications), on every timer a call sets.
    var nanosecondCount: Int64 { Int64(truncatingIfNeeded: attoseconds / 1_000_000_000) }

    /// In seconds, fractions included.
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }

    /// The same span as NIO's timer type.
    var timeAmount: TimeAmount { .nanoseconds(nanosecondCount) }
}
