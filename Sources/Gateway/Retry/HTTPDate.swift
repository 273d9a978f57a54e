import Foundation

/// HTTP dates (RFC 9110 section 5.6.7), as `Retry-After` may carry them:
/// IMF-fixdate, and the obsolete RFC 850 and asctime forms recipients must
/// still accept.
package enum HTTPDate {
    /// Seconds since 1970 now, by the wall clock.
    package static func now() -> Int64 { Int64(Date().timeIntervalSince1970) }

    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    /// Seconds since 1970, or nil when `text` is no HTTP date.
    package static func parse(_ text: String) -> Int64? {
        let words = text.split(whereSeparator: { $0 == " " || $0 == "," }).map(String.init)
        var day: Int?, month: Int?, year: Int?, time: [Int]?
        switch words.count {
        case 6 where words[5].uppercased() == "GMT":  // Sun, 06 Nov 1994 08:49:37 GMT
            (day, month, year, time) = (Int(words[1]), monthNumber(words[2]), Int(words[3]), clock(words[4]))
        case 4 where words[3] == "GMT":  // Sunday, 06-Nov-94 08:49:37 GMT
            let parts = words[1].split(separator: "-").map(String.init)
            guard parts.count == 3, parts[2].count == 2, let yy = Int(parts[2]) else { return nil }
            (day, month, year, time) = (Int(parts[0]), monthNumber(parts[1]), yy < 70 ? 2000 + yy : 1900 + yy, clock(words[2]))
        case 5:  // Sun Nov  6 08:49:37 1994
            (day, month, year, time) = (Int(words[2]), monthNumber(words[1]), Int(words[4]), clock(words[3]))
        default:
            return nil
        }
        // Four-digit years only: a longer one (FuzzCache found one) would overflow the seconds.
        guard let day, let month, let year, let time, (1...31).contains(day), (1...9999).contains(year) else { return nil }
        return daysSince1970(year: year, month: month, day: day) * 86_400 + Int64(time[0] * 3600 + time[1] * 60 + time[2])
    }

    /// Whether `text` is exactly one of the three forms for the instant it
    /// names (case aside): what a cache requires of `Expires` (RFC 9111 section 5.3).
    package static func isWellFormed(_ text: String) -> Bool {
        guard let at = parse(text) else { return false }
        let imf = format(at)
        let parts = imf.split(separator: " ").map(String.init)
        let weekday = String(parts[0].dropLast())
        let fullWeekday = ["Sun": "Sunday", "Mon": "Monday", "Tue": "Tuesday", "Wed": "Wednesday", "Thu": "Thursday", "Fri": "Friday",
                           "Sat": "Saturday"][weekday] ?? weekday
        let day = Int(parts[1]) ?? 0
        let rfc850 = "\(fullWeekday), \(parts[1])-\(parts[2])-\(parts[3].suffix(2)) \(parts[4]) GMT"
        let asctime = "\(weekday) \(parts[2]) \(day < 10 ? " \(day)" : "\(day)") \(parts[4]) \(parts[3])"
        return [imf, rfc850, asctime].contains { $0.lowercased() == text.lowercased() }
    }

    private static func monthNumber(_ name: String) -> Int? {
        months.firstIndex(of: name.lowercased()).map { $0 + 1 }
    }

    private static func clock(_ text: String) -> [Int]? {
        let parts = text.split(separator: ":").compactMap { Int($0) }
        guard parts.count == 3, (0...23).contains(parts[0]), (0...59).contains(parts[1]), (0...60).contains(parts[2]) else { return nil }
        return parts
    }

    private static let weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let monthNames = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// IMF-fixdate for `seconds` since 1970: `Sun, 06 Nov 1994 08:49:37 GMT`.
    package static func format(_ seconds: Int64) -> String {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let time = Int(seconds - days * 86_400)
        let (year, month, day) = civil(days)
        // 1970-01-01 was a Thursday.
        let weekday = Int(((days % 7) + 11) % 7)
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(weekdays[weekday]), \(two(day)) \(monthNames[month - 1]) \(year) "
            + "\(two(time / 3600)):\(two(time / 60 % 60)):\(two(time % 60)) GMT"
    }

    /// Howard Hinnant's civil-from-days.
    private static func civil(_ days: Int64) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (Int(yoe + era * 400 + (month <= 2 ? 1 : 0)), Int(month), Int(day))
    }

    /// Howard Hinnant's days-from-civil.
    private static func daysSince1970(year: Int, month: Int, day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let m = Int64(month)
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + Int64(day) - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}
