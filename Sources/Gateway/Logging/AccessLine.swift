import Foundation
import NIOCore

/// One access line, written straight into memory measured for it (`room`)
/// in the configured format, fields in a fixed order, numbers as numbers
/// in JSON: no dictionary, no interpolation, no per-call date formatting
/// (`Clock` caches the second's text), one capacity check per line.
/// Hand-written because swift-log's handlers cost a third of a call. Not
/// copyable: it writes into memory it does not own, for one line only.
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
        mutating func write(_ format: Format, now monotonic: NIODeadline, into out: inout RawWriter) {
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
                // Room for any `tm_year`'s digits: 10, then 15 bytes of the rest.
                iso = Array(unsafeUninitializedCapacity: 32) { bytes, count in
                    var out = RawWriter(UnsafeMutableRawBufferPointer(bytes))
                    out.putDecimal(UInt(Int(parts.tm_year) + 1900), minimumDigits: 4)
                    for (separator, part) in [("-", parts.tm_mon + 1), ("-", parts.tm_mday), ("T", parts.tm_hour), (":", parts.tm_min),
                                              (":", parts.tm_sec)] as [(StaticString, Int32)] {
                        out.put(separator)
                        out.putDecimal(UInt(part), minimumDigits: 2)
                    }
                    count = out.at
                }
                text = iso + Array("+0000".utf8)
            }
            guard format != .text else { return out.put(text) }
            out.put(iso)
            out.put(".")
            out.putDecimal(UInt(nanoseconds % 1_000_000_000 / 1_000_000), minimumDigits: 3)
            out.put("Z")
        }
    }

    /// The most bytes a line can take whose text values hold `textBytes`
    /// bytes together: each byte escaped at worst as `\u00XX`, and the
    /// fixed part (prefix, time, keys, quotes, numbers) under 1 KiB.
    static func room(textBytes: Int) -> Int { 1024 + 6 * textBytes }

    let format: Format
    private var out: RawWriter

    /// Starts a line in `raw`, which holds at least `room(textBytes:)` bytes
    /// for the text values that will be written.
    init(_ format: Format, into raw: UnsafeMutableRawBufferPointer, clock: inout Clock, now: NIODeadline = .now()) {
        self.format = format
        out = RawWriter(raw)
        switch format {
        case .text:
            clock.write(.text, now: now, into: &out)
            out.put(" info gatewayd.access:")
        case .json:
            out.put(#"{"ts":""#)
            clock.write(.json, now: now, into: &out)
            out.put(#"","level":"info","logger":"gatewayd.access","msg":"access""#)
        case .logfmt:
            out.put("ts=")
            clock.write(.logfmt, now: now, into: &out)
            out.put(" level=info logger=gatewayd.access msg=access")
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
        if value < 0 { out.put(UInt8(ascii: "-")) }
        out.putDecimal(value.magnitude)
    }

    /// Milliseconds with three decimals, from nanoseconds.
    mutating func field(_ key: StaticString, millis nanoseconds: Int64) {
        self.key(key)
        let micros = UInt(max(0, nanoseconds / 1000))
        out.putDecimal(micros / 1000)
        out.put(UInt8(ascii: "."))
        out.putDecimal(micros % 1000, minimumDigits: 3)
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
        format == .json ? out.put("null") : out.put(UInt8(ascii: "-"))
    }

    private mutating func key(_ key: StaticString) {
        switch format {
        case .json:
            out.put(",\"")
            out.put(key)
            out.put("\":")
        case .text, .logfmt:
            out.put(UInt8(ascii: " "), key, UInt8(ascii: "="))
        }
    }

    /// Ends the line; the bytes written.
    consuming func finish() -> Int {
        if format == .json { out.put(UInt8(ascii: "}")) }
        out.put(UInt8(ascii: "\n"))
        return out.at
    }

    /// logfmt's rule: quoted (with `\"`, `\\` and control characters escaped)
    /// when the value is empty or holds a space, `=`, a quote or a control character.
    private mutating func bareOrQuoted(_ value: String) {
        // A bare value is copied from the bytes it was checked on: one pass into the string's storage.
        let copied = value.utf8.withContiguousStorageIfAvailable { bytes in
            guard !bytes.isEmpty, Self.isQuiet(bytes) || Self.isBare(bytes) else { return false }
            out.put(UnsafeRawBufferPointer(bytes))
            return true
        }
        if copied == true { return }
        if copied == nil, Self.isBare(Array(value.utf8)) { return out.put(value) }
        out.put(UInt8(ascii: "\""))
        escaped(value)
        out.put(UInt8(ascii: "\""))
    }

    private static func isBare(_ utf8: some Collection<UInt8>) -> Bool {
        !utf8.isEmpty && !utf8.contains { $0 <= 0x20 || $0 == UInt8(ascii: "=") || $0 == UInt8(ascii: "\"") || $0 == 0x7F }
    }

    private static func isPlain(_ utf8: some Collection<UInt8>) -> Bool {
        !utf8.contains { $0 < 0x20 || $0 == 0x7F || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }
    }

    /// No byte that makes a value bare-unsafe or in need of escapes: none
    /// under 0x21, no DEL, `"`, `=` or `\` (such values are both bare and
    /// plain). Eight bytes at a time (hand-written: the byte loops above were
    /// ~9 instructions a byte, a quarter of the line, under callgrind); any
    /// such byte sends the value to those exact loops.
    static func isQuiet(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101, high = 0x80 &* ones
        // Whether any byte of `word` is zero (as a whole: exact).
        func anyZero(_ word: UInt64) -> Bool { (word &- ones) & ~word & high != 0 }
        var i = 0
        if let base = bytes.baseAddress {
            while i + 8 <= bytes.count {
                let word = UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self)
                // Bytes under 0x21 (Bit Twiddling Hacks' hasless), then each of the four.
                if (word &- 0x21 &* ones) & ~word & high != 0 || anyZero(word ^ 0x22 &* ones) || anyZero(word ^ 0x3D &* ones)
                    || anyZero(word ^ 0x5C &* ones) || anyZero(word ^ 0x7F &* ones)
                {
                    return false
                }
                i += 8
            }
        }
        while i < bytes.count {
            let byte = bytes[i]
            if byte <= 0x20 || byte == 0x22 || byte == 0x3D || byte == 0x5C || byte == 0x7F { return false }
            i += 1
        }
        return true
    }

    private mutating func jsonString(_ value: String) {
        out.put(UInt8(ascii: "\""))
        escaped(value)
        out.put(UInt8(ascii: "\""))
    }

    /// `"` and `\` escaped, control characters as `\n`, `\r`, `\t` or `\u00XX`
    /// (valid in JSON and read back by logfmt parsers); other bytes as they are.
    private mutating func escaped(_ value: String) {
        // Nothing to escape (the usual case): one copy, from the bytes checked.
        let copied = value.utf8.withContiguousStorageIfAvailable { bytes in
            guard Self.isQuiet(bytes) || Self.isPlain(bytes) else { return false }
            out.put(UnsafeRawBufferPointer(bytes))
            return true
        }
        if copied == true { return }
        if copied == nil, Self.isPlain(Array(value.utf8)) { return out.put(value) }
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.put(#"\""#)
            case UInt8(ascii: "\\"): out.put(#"\\"#)
            case 0x0A: out.put(#"\n"#)
            case 0x0D: out.put(#"\r"#)
            case 0x09: out.put(#"\t"#)
            case 0..<0x20, 0x7F:
                out.put(#"\u00"#)
                let hex: StaticString = "0123456789abcdef"
                out.put(hex.utf8Start[Int(byte >> 4)])
                out.put(hex.utf8Start[Int(byte & 0xF)])
            default: out.put(byte)
            }
        }
    }
}
