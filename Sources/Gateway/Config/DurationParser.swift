/// `250ms`, `2s`, `1.5s`, `1m`, `1h30m`, `100us`: one or more number+unit
/// pairs. A bare number is refused (its unit would be a guess), and so is
/// anything longer than `longest` (a timer that far out overflows the clock).
enum DurationParser {
    static let longest = Duration.seconds(365 * 24 * 3600)

    static func parse(_ text: String) -> Duration? {
        var total = Duration.zero
        var rest = Substring(text)
        guard !rest.isEmpty else { return nil }
        while !rest.isEmpty {
            let number = rest.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
            guard !number.isEmpty, let value = Double(number) else { return nil }
            rest = rest.dropFirst(number.count)
            let unit = rest.prefix { $0.isASCII && $0.isLetter }
            rest = rest.dropFirst(unit.count)
            let nanoseconds: Double
            switch unit {
            case "ns": nanoseconds = 1
            case "us": nanoseconds = 1e3
            case "ms": nanoseconds = 1e6
            case "s": nanoseconds = 1e9
            case "m": nanoseconds = 60e9
            case "h": nanoseconds = 3600e9
            default: return nil
            }
            let part = value * nanoseconds
            guard part <= Double(longest.nanosecondCount) else { return nil }
            total += .nanoseconds(Int64(part))
            guard total <= longest else { return nil }
        }
        return total
    }

    /// The shortest exact spelling: `1500ms` -> "1500ms", 2 s -> "2s".
    static func format(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        if attoseconds == 0 {
            if seconds % 3600 == 0 && seconds != 0 { return "\(seconds / 3600)h" }
            if seconds % 60 == 0 && seconds != 0 { return "\(seconds / 60)m" }
            return "\(seconds)s"
        }
        let nanos = duration.nanosecondCount
        if nanos % 1_000_000 == 0 { return "\(nanos / 1_000_000)ms" }
        if nanos % 1000 == 0 { return "\(nanos / 1000)us" }
        return "\(nanos)ns"
    }
}
