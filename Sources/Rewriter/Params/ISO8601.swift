/// ISO 8601 / RFC 3339 date-times to epoch milliseconds, without Foundation:
/// `2024-05-01T12:30:00Z`, `...T12:30:00.123+02:00`, `...T12:30Z`, `2024-05-01`
/// (midnight UTC). A time without an offset is UTC. Sub-millisecond digits
/// are truncated towards zero.
enum ISO8601 {
    static func millisecondsSince1970(_ text: String) -> Int64? {
        var p = Scanner(Array(text.utf8))
        guard let year = p.digits(4), p.take(UInt8(ascii: "-")), let month = p.digits(2), p.take(UInt8(ascii: "-")),
            let day = p.digits(2), (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day)
        else { return nil }
        var seconds = daysFromCivil(year: year, month: month, day: day) * 86_400
        var fraction: Int64 = 0  // in 1e-9 s
        if p.atEnd { return seconds * 1000 }
        guard p.take(UInt8(ascii: "T")) || p.take(UInt8(ascii: "t")) || p.take(UInt8(ascii: " ")),
            let hour = p.digits(2), p.take(UInt8(ascii: ":")), let minute = p.digits(2), hour < 24, minute < 60
        else { return nil }
        var second: Int64 = 0
        if p.take(UInt8(ascii: ":")) {
            guard let s = p.digits(2), s <= 60 else { return nil }
            second = s
            if p.take(UInt8(ascii: ".")) || p.take(UInt8(ascii: ",")) {
                var scale: Int64 = 100_000_000
                var count = 0
                while let d = p.digit() {
                    fraction += d * scale
                    scale /= 10
                    count += 1
                }
                if count == 0 { return nil }
            }
        }
        seconds += hour * 3600 + minute * 60 + second
        if p.take(UInt8(ascii: "Z")) || p.take(UInt8(ascii: "z")) {
        } else if let sign = p.sign() {
            guard let oh = p.digits(2), oh < 24 else { return nil }
            _ = p.take(UInt8(ascii: ":"))
            guard let om = p.digits(2), om < 60 else { return nil }
            seconds -= sign * (oh * 3600 + om * 60)
        }
        guard p.atEnd else { return nil }
        // Truncated towards zero, as seconds * 1e9 + fraction over 1e6 would
        // be, without the nanoseconds that overflow Int64 past the year 2262.
        var milliseconds = seconds * 1000 + fraction / 1_000_000
        if seconds < 0, fraction % 1_000_000 != 0 { milliseconds += 1 }
        return milliseconds
    }

    /// Days since 1970-01-01 in the proleptic Gregorian calendar (H. Hinnant).
    static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    private struct Scanner {
        let bytes: [UInt8]
        var index = 0
        init(_ bytes: [UInt8]) { self.bytes = bytes }
        var atEnd: Bool { index == bytes.count }

        mutating func take(_ byte: UInt8) -> Bool {
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        mutating func digit() -> Int64? {
            guard index < bytes.count, isDigit(bytes[index]) else { return nil }
            defer { index += 1 }
            return Int64(bytes[index] - UInt8(ascii: "0"))
        }

        mutating func digits(_ count: Int) -> Int64? {
            var value: Int64 = 0
            for _ in 0..<count {
                guard let d = digit() else { return nil }
                value = value * 10 + d
            }
            return value
        }

        mutating func sign() -> Int64? {
            if take(UInt8(ascii: "+")) { return 1 }
            if take(UInt8(ascii: "-")) { return -1 }
            return nil
        }
    }
}
