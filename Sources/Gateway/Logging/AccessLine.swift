import Foundation
import NIOCore

/// One access line, written straight into bytes in the configured format,
/// fields in a fixed order, numbers as numbers in JSON: no dictionary, no
/// interpolation, no per-call date formatting (`Clock` caches the second's
/// text). Hand-written because swift-log's handlers cost a third of a call.
/// Not copyable: the line's bytes are moved from the log's buffer and back,
/// never shared, so no append copies what the buffer already holds.
struct AccessLine: ~Copyable {
    enum Format: Sendable { case text, json, logfmt }

    /// The wall clock's text, formatted once per second per event loop. The
    /// wall clock is read once a second too: between reads, its time is the
    /// monotonic `now` the line's duration was taken from, plus their offset.
    struct Clock {
        private var second = -1
        /// Wall-clock nanoseconds minus monotonic ones, as of the last read.
        private var offset: Int64 = 0
        /// When (monotonic) the wall clock is read again.
        private var nextRead: UInt64 = 0
        private var text: [UInt8] = []
        private var iso: [UInt8] = []

        /// `2026-11-24T15:16:42+0000` (text) or `2026-11-24T15:16:42.123Z` (JSON, logfmt).
        mutating func write(_ format: Format, now monotonic: NIODeadline, into out: inout [UInt8]) {
            let ticks = monotonic.uptimeNanoseconds
            if ticks >= nextRead {
                var wall = timespec()
                clock_gettime(CLOCK_REALTIME, &wall)
                offset = Int64(wall.tv_sec) * 1_000_000_000 + Int64(wall.tv_nsec) - Int64(ticks)
                nextRead = ticks + 1_000_000_000
            }
            let nanoseconds = Int64(ticks) + offset
            let seconds = Int(nanoseconds / 1_000_000_000)
            if seconds != second {
                second = seconds
                var time = seconds
                var parts = tm()
                gmtime_r(&time, &parts)
                iso = []
                Self.digits(Int(parts.tm_year) + 1900, 4, into: &iso)
                iso.append(UInt8(ascii: "-"))
                Self.digits(Int(parts.tm_mon) + 1, 2, into: &iso)
                iso.append(UInt8(ascii: "-"))
                Self.digits(Int(parts.tm_mday), 2, into: &iso)
                iso.append(UInt8(ascii: "T"))
                Self.digits(Int(parts.tm_hour), 2, into: &iso)
                iso.append(UInt8(ascii: ":"))
                Self.digits(Int(parts.tm_min), 2, into: &iso)
                iso.append(UInt8(ascii: ":"))
                Self.digits(Int(parts.tm_sec), 2, into: &iso)
                text = iso + Array("+0000".utf8)
            }
            guard format != .text else { return out.append(contentsOf: text) }
            out.append(contentsOf: iso)
            out.append(UInt8(ascii: "."))
            Self.digits(Int(nanoseconds % 1_000_000_000 / 1_000_000), 3, into: &out)
            out.append(UInt8(ascii: "Z"))
        }

        static func digits(_ value: Int, _ count: Int, into out: inout [UInt8]) {
            var divisor = 1
            for _ in 1..<count { divisor *= 10 }
            while divisor > 0 {
                out.append(UInt8(ascii: "0") + UInt8(value / divisor % 10))
                divisor /= 10
            }
        }
    }

    let format: Format
    private(set) var bytes: [UInt8]

    /// Starts a line in `out` (taken, and handed back by `finish`).
    init(_ format: Format, into out: consuming [UInt8], clock: inout Clock, now: NIODeadline = .now()) {
        self.format = format
        bytes = consume out
        switch format {
        case .text:
            clock.write(.text, now: now, into: &bytes)
            append(" info gatewayd.access:")
        case .json:
            append(#"{"ts":""#)
            clock.write(.json, now: now, into: &bytes)
            append(#"","level":"info","logger":"gatewayd.access","msg":"access""#)
        case .logfmt:
            append("ts=")
            clock.write(.logfmt, now: now, into: &bytes)
            append(" level=info logger=gatewayd.access msg=access")
        }
    }

    // One overload per kind of value, each taking it borrowed: an enum
    // wrapping the value cost a retain and a release per string field.
    mutating func field(_ key: StaticString, _ value: String) {
        self.key(key)
        format == .json ? jsonString(value) : bareOrQuoted(value)
    }

    mutating func field(_ key: StaticString, _ value: Int) {
        self.key(key)
        decimal(value)
    }

    /// Milliseconds with three decimals, from nanoseconds.
    mutating func field(_ key: StaticString, millis nanoseconds: Int64) {
        self.key(key)
        millis(nanoseconds)
    }

    /// No value: `-` in text and logfmt, `null` in JSON.
    mutating func field(_ key: StaticString, _ value: String?) {
        guard let value else { return none(key) }
        field(key, value)
    }

    mutating func field(_ key: StaticString, _ value: Int?) {
        guard let value else { return none(key) }
        field(key, value)
    }

    mutating func field(_ key: StaticString, millis nanoseconds: Int64?) {
        guard let nanoseconds else { return none(key) }
        field(key, millis: nanoseconds)
    }

    private mutating func none(_ key: StaticString) {
        self.key(key)
        format == .json ? append("null") : bytes.append(UInt8(ascii: "-"))
    }

    private mutating func key(_ key: StaticString) {
        switch format {
        case .json:
            append(",\"")
            append(key)
            append("\":")
        case .text, .logfmt:
            bytes.append(UInt8(ascii: " "))
            append(key)
            bytes.append(UInt8(ascii: "="))
        }
    }

    /// Copied in one piece: appending a literal's or a string's UTF8View
    /// went byte by byte through the generic sequence path.
    private mutating func append(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    /// The line with its end; the buffer it was written into.
    consuming func finish() -> [UInt8] {
        if format == .json { bytes.append(UInt8(ascii: "}")) }
        bytes.append(UInt8(ascii: "\n"))
        return bytes
    }

    private mutating func millis(_ nanoseconds: Int64) {
        let micros = max(0, Int(nanoseconds / 1000))
        decimal(micros / 1000)
        bytes.append(UInt8(ascii: "."))
        Clock.digits(micros % 1000, 3, into: &bytes)
    }

    /// Digits straight into the line: no String per number.
    private mutating func decimal(_ number: Int) {
        if number < 0 { bytes.append(UInt8(ascii: "-")) }
        let magnitude = number.magnitude
        var divisor: UInt = 1
        while divisor <= magnitude / 10 { divisor *= 10 }
        while divisor > 0 {
            bytes.append(UInt8(ascii: "0") + UInt8(magnitude / divisor % 10))
            divisor /= 10
        }
    }

    /// logfmt's rule: quoted (with `\"`, `\\` and control characters escaped)
    /// when the value is empty or holds a space, `=`, a quote or a control character.
    private mutating func bareOrQuoted(_ value: String) {
        let bare = value.utf8.withContiguousStorageIfAvailable(Self.isBare) ?? Self.isBare(Array(value.utf8))
        guard !bare else { return append(value) }
        bytes.append(UInt8(ascii: "\""))
        escaped(value)
        bytes.append(UInt8(ascii: "\""))
    }

    private static func isBare(_ utf8: some Collection<UInt8>) -> Bool {
        !utf8.isEmpty && !utf8.contains { $0 <= 0x20 || $0 == UInt8(ascii: "=") || $0 == UInt8(ascii: "\"") || $0 == 0x7F }
    }

    private static func isPlain(_ utf8: some Collection<UInt8>) -> Bool {
        !utf8.contains { $0 < 0x20 || $0 == 0x7F || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }
    }

    /// Copied in one piece when the string's bytes are contiguous (native strings, all the data path has).
    private mutating func append(_ value: String) {
        if value.utf8.withContiguousStorageIfAvailable({ bytes.append(contentsOf: $0) }) == nil { bytes.append(contentsOf: value.utf8) }
    }

    private mutating func jsonString(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        escaped(value)
        bytes.append(UInt8(ascii: "\""))
    }

    /// `"` and `\` escaped, control characters as `\n`, `\r`, `\t` or `\u00XX`
    /// (valid in JSON and read back by logfmt parsers); other bytes as they are.
    private mutating func escaped(_ value: String) {
        // Nothing to escape (the usual case): one copy.
        if value.utf8.withContiguousStorageIfAvailable(Self.isPlain) ?? Self.isPlain(Array(value.utf8)) { return append(value) }
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: #"\""#.utf8)
            case UInt8(ascii: "\\"): bytes.append(contentsOf: #"\\"#.utf8)
            case 0x0A: bytes.append(contentsOf: #"\n"#.utf8)
            case 0x0D: bytes.append(contentsOf: #"\r"#.utf8)
            case 0x09: bytes.append(contentsOf: #"\t"#.utf8)
            case 0..<0x20, 0x7F:
                bytes.append(contentsOf: #"\u00"#.utf8)
                let hex = Array("0123456789abcdef".utf8)
                bytes.append(hex[Int(byte >> 4)])
                bytes.append(hex[Int(byte & 0xF)])
            default: bytes.append(byte)
            }
        }
    }
}
