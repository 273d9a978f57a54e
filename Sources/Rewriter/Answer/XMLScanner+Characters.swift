/// The scanner's character level: text and attribute values with their
/// references and line ends, which characters XML allows, and names.
extension XMLScanner {
    // MARK: Text

    /// Character data up to the next tag, in one pass when it holds no reference and no CR (nearly always).
    mutating func text() throws(Declined) {
        let start = i
        var end = i, plain = true, ascii = true
        while true {
            end = plainEnd(from: end)
            guard end < bytes.count else { break }
            let b = bytes[end]
            if b == UInt8(ascii: "<") { break }
            if b < 0x20 {
                guard b == 0x09 || b == 0x0A || b == 0x0D else { throw Declined() }
                if b == 0x0D { plain = false }
            } else if b == UInt8(ascii: "&") {
                plain = false
            } else if b >= 0x80 {
                ascii = false
            } else if b == UInt8(ascii: ">"), end >= start + 2, bytes[end - 1] == UInt8(ascii: "]"), bytes[end - 2] == UInt8(ascii: "]") {
                throw Declined()
            }
            end += 1
        }
        if !ascii { try checkCharacters(start..<end) }
        guard !plain else {
            builder.text(borrowing: UnsafeBufferPointer(rebasing: bytes[start..<end]))
            i = end
            return
        }
        var resolved: [UInt8] = []
        resolved.reserveCapacity(end - start)
        while i < end {
            if bytes[i] == UInt8(ascii: "&") {
                try reference(into: &resolved)
            } else {
                let run = i
                let next = bytes[i..<end].firstIndex(of: UInt8(ascii: "&")) ?? end
                resolved.append(contentsOf: Self.normalized(bytes[run..<next]))
                i = next
            }
        }
        builder.text(resolved)
    }

    /// Where the bytes text needs nothing done for end (printable ASCII but
    /// `<`, `&` and `>`), read eight at a time: by hand, because the byte
    /// loop was a sixth of a 2 KB SOAP answer's decode.
    func plainEnd(from start: Int) -> Int {
        var index = start
        if let base = bytes.baseAddress {
            let raw = UnsafeRawPointer(base)
            while index + 8 <= bytes.count, !Self.hasSpecial(raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)) { index += 8 }
        }
        while index < bytes.count, !Self.isSpecial(bytes[index]) { index += 1 }
        return index
    }

    static func isSpecial(_ b: UInt8) -> Bool {
        b < 0x20 || b >= 0x80 || b == UInt8(ascii: "<") || b == UInt8(ascii: "&") || b == UInt8(ascii: ">")
    }

    /// Whether any of eight bytes `isSpecial`: the word tests for a zero byte and a byte below n (Bit Twiddling Hacks).
    static func hasSpecial(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        func below(_ v: UInt64, _ n: UInt64) -> UInt64 { (v &- ones &* n) & ~v & highs }
        return word & highs | below(word, 0x20) | below(word ^ (ones &* 0x3C), 1) | below(word ^ (ones &* 0x26), 1)
            | below(word ^ (ones &* 0x3E), 1) != 0
    }

    mutating func appendText(_ range: Range<Int>) {
        if bytes[range].contains(0x0D) {
            builder.text(Self.normalized(bytes[range]))
        } else {
            builder.text(borrowing: UnsafeBufferPointer(rebasing: bytes[range]))
        }
    }

    /// An attribute's value, references resolved and whitespace made spaces (XML 1.0 §3.3.3).
    mutating func attributeValue() throws(Declined) -> String {
        guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") || bytes[i] == UInt8(ascii: "'") else { throw Declined() }
        let quote = bytes[i]
        let start = i + 1
        guard let end = bytes[start...].firstIndex(of: quote) else { throw Declined() }
        let raw = bytes[start..<end]
        guard !raw.contains(UInt8(ascii: "<")) else { throw Declined() }
        try checkCharacters(start..<end)
        if !raw.contains(where: { $0 == UInt8(ascii: "&") || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }) {
            i = end + 1
            return String(decoding: raw, as: UTF8.self)
        }
        var value: [UInt8] = []
        value.reserveCapacity(raw.count)
        i = start
        while i < end {
            switch bytes[i] {
            case UInt8(ascii: "&"):
                try reference(into: &value)
                continue
            case 0x0D:
                value.append(0x20)
                if i + 1 < end, bytes[i + 1] == 0x0A { i += 1 }
            case 0x09, 0x0A:
                value.append(0x20)
            case let b:
                value.append(b)
            }
            i += 1
        }
        guard i == end else { throw Declined() }
        i = end + 1
        return String(decoding: value, as: UTF8.self)
    }

    /// `&lt;` and its four siblings, `&#N;` and `&#xH;`; any other entity is libxml2's to refuse.
    mutating func reference(into out: inout [UInt8]) throws(Declined) {
        let start = i + 1
        guard let semicolon = bytes[start..<min(bytes.count, start + 10)].firstIndex(of: UInt8(ascii: ";")) else { throw Declined() }
        let name = bytes[start..<semicolon]
        i = semicolon + 1
        if let predefined = Self.predefined.first(where: { name.elementsEqual($0.name.utf8) }) {
            out.append(predefined.byte)
        } else {
            guard name.first == UInt8(ascii: "#") else { throw Declined() }
            var digits = name.dropFirst()
            var radix: UInt32 = 10
            if digits.first == UInt8(ascii: "x") { radix = 16; digits = digits.dropFirst() }
            guard !digits.isEmpty else { throw Declined() }
            var scalar: UInt32 = 0
            for digit in digits {
                guard let value = Self.digit(digit, radix: radix) else { throw Declined() }
                scalar = scalar * radix + value
            }
            guard Self.isCharacter(scalar), let unicode = Unicode.Scalar(scalar) else { throw Declined() }
            out.append(contentsOf: String(Character(unicode)).utf8)
        }
    }

    static let predefined: [(name: String, byte: UInt8)] = [
        ("lt", UInt8(ascii: "<")), ("gt", UInt8(ascii: ">")), ("amp", UInt8(ascii: "&")), ("quot", UInt8(ascii: "\"")), ("apos", UInt8(ascii: "'")),
    ]

    // MARK: Characters

    /// XML's characters only, in valid UTF-8.
    func checkCharacters(_ range: Range<Int>) throws(Declined) {
        var ascii = true
        var index = range.lowerBound
        while index < range.upperBound {
            let b = bytes[index]
            if b < 0x20 {
                guard b == 0x09 || b == 0x0A || b == 0x0D else { throw Declined() }
            } else if b >= 0x80 {
                ascii = false
            }
            index += 1
        }
        guard !ascii else { return }
        // Valid UTF-8 of XML's characters: no surrogates (refused by the validation), no U+FFFE or U+FFFF.
        guard let string = String(validating: bytes[range], as: UTF8.self),
              !string.unicodeScalars.contains(where: { !Self.isCharacter($0.value) }) else { throw Declined() }
    }

    static func isCharacter(_ scalar: UInt32) -> Bool {
        scalar == 0x09 || scalar == 0x0A || scalar == 0x0D || (0x20...0xD7FF).contains(scalar) || (0xE000...0xFFFD).contains(scalar)
            || (0x10000...0x10FFFF).contains(scalar)
    }

    /// Line ends as XML reads them: CR LF and a lone CR become LF.
    static func normalized(_ bytes: some Collection<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var previousCR = false
        for b in bytes {
            if b == 0x0D {
                out.append(0x0A)
            } else if !(b == 0x0A && previousCR) {
                out.append(b)
            }
            previousCR = b == 0x0D
        }
        return out
    }

    static func digit(_ b: UInt8, radix: UInt32) -> UInt32? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return UInt32(b - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f") where radix == 16: return UInt32(b - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F") where radix == 16: return UInt32(b - UInt8(ascii: "A") + 10)
        default: return nil
        }
    }

    // MARK: Names

    /// A name of ASCII name characters (anything wider is libxml2's).
    mutating func name() throws(Declined) -> Range<Int> {
        let start = i
        guard start < bytes.count, Self.isNameStart(bytes[start]) else { throw Declined() }
        // A local index: `i` is the scanner's, written back to memory each step.
        var end = start + 1
        while end < bytes.count, Self.isNameCharacter(bytes[end]) { end += 1 }
        guard end < bytes.count, bytes[end] < 0x80, end - start <= Self.maxName else { throw Declined() }
        i = end
        return start..<end
    }

    /// A name with at most one colon, each side an NCName (libxml2 reads
    /// `xml:-lang` as one unprefixed name: not ours to mirror).
    mutating func qualifiedName() throws(Declined) -> Range<Int> {
        let name = try self.name()
        guard let colon = name.first(where: { bytes[$0] == UInt8(ascii: ":") }) else { return name }
        guard colon > name.lowerBound, colon + 1 < name.upperBound, Self.isNameStart(bytes[colon + 1]),
              !name[(colon + 1)...].contains(where: { bytes[$0] == UInt8(ascii: ":") })
        else { throw Declined() }
        return name
    }

    static func isNameStart(_ b: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(b) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(b)
            || b == UInt8(ascii: "_") || b == UInt8(ascii: ":")
    }

    /// `isNameStart` or a digit, `-` or `.`: two 64-bit masks, a shift per byte
    /// instead of eight comparisons (names were a tenth of a SOAP answer's scan).
    static func isNameCharacter(_ b: UInt8) -> Bool {
        b < 64 ? (0x07FF_6000_0000_0000 as UInt64) >> b & 1 != 0 : b < 128 && (0x07FF_FFFE_87FF_FFFE as UInt64) >> (b - 64) & 1 != 0
    }

    /// `xml` in any case, or `xmlns`: names XML keeps for itself.
    static func isReserved(_ name: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
        name.count >= 3 && name.prefix(3).lazy.map { $0 | 0x20 }.elementsEqual("xml".utf8) && (name.count == 3 || name.elementsEqual("xmlns".utf8))
    }

    static func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D }

    /// Whitespace skipped; whether there was any.
    mutating func skipSpace() -> Bool {
        let start = i
        var end = start
        while end < bytes.count, Self.isSpace(bytes[end]) { end += 1 }
        i = end
        return end > start
    }

    /// Two names' bytes equal, compared in place (slices of the array would each retain it).
    func same(_ a: Range<Int>, _ b: Range<Int>) -> Bool {
        guard a.count == b.count else { return false }
        for offset in 0..<a.count where bytes[a.lowerBound + offset] != bytes[b.lowerBound + offset] { return false }
        return true
    }

    func starts(with prefix: String.UTF8View, at start: Int? = nil) -> Bool {
        let start = start ?? i
        guard bytes.count - start >= prefix.count else { return false }
        var index = start
        for b in prefix {
            guard bytes[index] == b else { return false }
            index += 1
        }
        return true
    }

    mutating func expect(_ b: UInt8) throws(Declined) {
        guard i < bytes.count, bytes[i] == b else { throw Declined() }
        i += 1
    }
}
