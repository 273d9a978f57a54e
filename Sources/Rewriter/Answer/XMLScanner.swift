/// The XML decoder's fast path, written by hand because a benchmark says so:
/// libxml2's pull reader alone took 8.5 µs of a 2 KB SOAP answer's 19
/// (docs/benchmarks.md), more than the whole translation may cost beside a
/// pass-through. It reads what legacy services send (UTF-8, no DTD, ASCII
/// names, declared prefixes) in one pass over the bytes, with checked
/// indexing, and declines everything else (another encoding, a DOCTYPE, an
/// unknown entity, any doubt about well-formedness) to libxml2, whose verdict
/// then stands. The fuzz target FuzzXML holds both to the same document on
/// every input this path accepts.
struct XMLScanner {
    /// Not read here: libxml2 decides.
    struct Declined: Error {}

    private let bytes: [UInt8]
    private let namespaces: XMLDecoder.Namespaces
    private var i = 0
    private var builder: XMLTreeBuilder
    /// Open elements' qualified names, for their end tags.
    private var open: [Range<Int>] = []
    /// Declared prefixes in scope, each with the depth of the element declaring it.
    private var prefixes: [(name: Range<Int>, depth: Int)] = []
    /// The tag being read's attributes (kept between tags for their capacity).
    private var attributes: [(name: Range<Int>, value: String)] = []

    /// libxml2's own limits: past them its verdict differs from a plain read.
    private static let maxDocument = 10_000_000, maxName = 50_000
    private static let maxAttributes = 32

    static func decode(_ bytes: [UInt8], namespaces: XMLDecoder.Namespaces, arrays: XMLArrayPaths, maxDepth: Int) -> JSONValue? {
        guard bytes.count < maxDocument else { return nil }
        var scanner = XMLScanner(bytes: bytes, namespaces: namespaces, builder: XMLTreeBuilder(arrays: arrays, maxDepth: maxDepth))
        return try? scanner.document()
    }

    private init(bytes: [UInt8], namespaces: XMLDecoder.Namespaces, builder: XMLTreeBuilder) {
        self.bytes = bytes
        self.namespaces = namespaces
        self.builder = builder
    }

    private mutating func document() throws(Declined) -> JSONValue {
        if starts(with: "\u{FEFF}".utf8) { i = 3 }
        if starts(with: "<?xml".utf8), i + 5 < bytes.count, Self.isSpace(bytes[i + 5]) { try declaration() }
        try miscellany()
        guard i + 1 < bytes.count, bytes[i] == UInt8(ascii: "<"), Self.isNameStart(bytes[i + 1]) else { throw Declined() }
        try startTag()
        while builder.depth > 0 {
            guard i + 1 < bytes.count else { throw Declined() }
            guard bytes[i] == UInt8(ascii: "<") else {
                try text()
                continue
            }
            switch bytes[i + 1] {
            case UInt8(ascii: "/"): try endTag()
            case UInt8(ascii: "?"): try instruction()
            case UInt8(ascii: "!") where starts(with: "<!--".utf8): try comment()
            case UInt8(ascii: "!") where starts(with: "<![CDATA[".utf8): try cdata()
            default: try startTag()
            }
        }
        try miscellany()
        guard i == bytes.count, let document = builder.document else { throw Declined() }
        return document
    }

    // MARK: Markup

    /// `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>`, in that order, each but the version optional.
    private mutating func declaration() throws(Declined) {
        i += 5
        var expected = ["version", "encoding", "standalone"][...]
        while true {
            let spaced = skipSpace()
            if starts(with: "?>".utf8) { i += 2; break }
            guard spaced else { throw Declined() }
            let name = try self.name()
            let key = String(decoding: bytes[name], as: UTF8.self)
            while let next = expected.first, next != key { guard next != "version" else { throw Declined() }; expected.removeFirst() }
            guard !expected.isEmpty else { throw Declined() }
            expected.removeFirst()
            _ = skipSpace()
            try expect(UInt8(ascii: "="))
            _ = skipSpace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") || bytes[i] == UInt8(ascii: "'") else { throw Declined() }
            let quote = bytes[i]
            let start = i + 1
            guard let end = bytes[start...].firstIndex(of: quote) else { throw Declined() }
            let value = String(decoding: bytes[start..<end], as: UTF8.self)
            i = end + 1
            switch key {
            case "version": guard value == "1.0" else { throw Declined() }
            case "encoding": guard value.lowercased() == "utf-8" else { throw Declined() }
            default: guard value == "yes" || value == "no" else { throw Declined() }
            }
        }
        if expected.first == "version" { throw Declined() }
    }

    /// Whitespace, comments and processing instructions, before and after the root.
    private mutating func miscellany() throws(Declined) {
        while true {
            _ = skipSpace()
            if starts(with: "<!--".utf8) {
                try comment()
            } else if starts(with: "<?".utf8) {
                try instruction()
            } else {
                return
            }
        }
    }

    private mutating func comment() throws(Declined) {
        i += 4
        let start = i
        while true {
            guard let dash = bytes[i...].firstIndex(of: UInt8(ascii: "-")), dash + 2 < bytes.count else { throw Declined() }
            i = dash + 1
            guard bytes[i] == UInt8(ascii: "-") else { continue }
            guard bytes[i + 1] == UInt8(ascii: ">") else { throw Declined() }
            try checkCharacters(start..<dash)
            i += 2
            return
        }
    }

    /// `<?target data?>`: skipped; an `xml` target past the start is refused.
    private mutating func instruction() throws(Declined) {
        i += 2
        let target = try name()
        guard !Self.isReserved(bytes[target]), !bytes[target].contains(UInt8(ascii: ":")) else { throw Declined() }
        if starts(with: "?>".utf8) { i += 2; return }
        guard skipSpace() else { throw Declined() }
        let start = i
        while true {
            guard let mark = bytes[i...].firstIndex(of: UInt8(ascii: "?")), mark + 1 < bytes.count else { throw Declined() }
            i = mark + 1
            if bytes[i] == UInt8(ascii: ">") {
                try checkCharacters(start..<mark)
                i += 1
                return
            }
        }
    }

    private mutating func cdata() throws(Declined) {
        i += 9
        let start = i
        while true {
            guard let bracket = bytes[i...].firstIndex(of: UInt8(ascii: "]")), bracket + 2 < bytes.count else { throw Declined() }
            i = bracket + 1
            if bytes[i] == UInt8(ascii: "]"), bytes[i + 1] == UInt8(ascii: ">") {
                try checkCharacters(start..<bracket)
                appendText(start..<bracket)
                i += 2
                return
            }
        }
    }

    // MARK: Elements

    private mutating func startTag() throws(Declined) {
        i += 1
        let qualified = try qualifiedName()
        attributes.removeAll(keepingCapacity: true)
        var empty = false
        while true {
            let spaced = skipSpace()
            guard i < bytes.count else { throw Declined() }
            if bytes[i] == UInt8(ascii: ">") { i += 1; break }
            if bytes[i] == UInt8(ascii: "/") {
                try expect(UInt8(ascii: "/"))
                try expect(UInt8(ascii: ">"))
                empty = true
                break
            }
            guard spaced else { throw Declined() }
            let name = try qualifiedName()
            _ = skipSpace()
            try expect(UInt8(ascii: "="))
            _ = skipSpace()
            let value = try attributeValue()
            // Checked pairwise, so few: an element with more is libxml2's, which hashes them.
            guard attributes.count < Self.maxAttributes else { throw Declined() }
            for other in attributes where same(other.name, name) { throw Declined() }
            attributes.append((name, value))
        }
        let depth = builder.depth + 1
        // Declarations first: they scope the element's own name and attributes.
        for attribute in attributes {
            guard let declared = declaredPrefix(attribute.name) else { continue }
            guard let prefix = declared else { continue }
            guard !attribute.value.isEmpty, !Self.isReserved(bytes[prefix]) else { throw Declined() }
            prefixes.append((prefix, depth))
        }
        let element = try local(qualified)
        guard builder.open(String(decoding: bytes[namespaces == .keep ? qualified : element], as: UTF8.self)) == nil else { throw Declined() }
        open.append(qualified)
        // libxml2's reader gives namespace declarations before the other attributes.
        if namespaces == .keep {
            for attribute in attributes where declaredPrefix(attribute.name) != nil {
                builder.attribute(String(decoding: bytes[attribute.name], as: UTF8.self), attribute.value)
            }
        }
        var locals: [Range<Int>] = []
        for attribute in attributes where declaredPrefix(attribute.name) == nil {
            let name = try local(attribute.name)
            // Two attributes of one expanded name are an error libxml2 reports; any two of one local name go to it.
            for other in locals where same(other, name) { throw Declined() }
            locals.append(name)
            builder.attribute(String(decoding: bytes[namespaces == .keep ? attribute.name : name], as: UTF8.self), attribute.value)
        }
        if empty { close() }
    }

    private mutating func endTag() throws(Declined) {
        i += 2
        let name = try self.name()
        _ = skipSpace()
        try expect(UInt8(ascii: ">"))
        guard let top = open.last, same(top, name) else { throw Declined() }
        close()
    }

    private mutating func close() {
        let depth = builder.depth
        while let last = prefixes.last, last.depth == depth { prefixes.removeLast() }
        open.removeLast()
        builder.close()
    }

    /// `xmlns` → .some(nil), `xmlns:p` → the prefix, anything else → nil.
    private func declaredPrefix(_ name: Range<Int>) -> Range<Int>?? {
        let xmlns = "xmlns".utf8
        guard bytes[name].starts(with: xmlns) else { return nil }
        if name.count == xmlns.count { return .some(nil) }
        guard bytes[name.lowerBound + xmlns.count] == UInt8(ascii: ":") else { return nil }
        return .some(name.lowerBound + xmlns.count + 1..<name.upperBound)
    }

    /// A name's local part, its prefix declared (or `xml`).
    private func local(_ name: Range<Int>) throws(Declined) -> Range<Int> {
        guard let colon = bytes[name].firstIndex(of: UInt8(ascii: ":")) else { return name }
        let prefix = name.lowerBound..<colon
        if !bytes[prefix].elementsEqual("xml".utf8) {
            guard prefixes.contains(where: { same($0.name, prefix) }) else { throw Declined() }
        }
        return colon + 1..<name.upperBound
    }

    // MARK: Text

    /// Character data up to the next tag, in one pass when it holds no reference and no CR (nearly always).
    private mutating func text() throws(Declined) {
        let start = i
        var end = i, plain = true, ascii = true
        while end < bytes.count {
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
            builder.text(bytes[start..<end])
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
        builder.text(resolved[...])
    }

    private mutating func appendText(_ range: Range<Int>) {
        if bytes[range].contains(0x0D) {
            builder.text(Self.normalized(bytes[range])[...])
        } else {
            builder.text(bytes[range])
        }
    }

    /// An attribute's value, references resolved and whitespace made spaces (XML 1.0 §3.3.3).
    private mutating func attributeValue() throws(Declined) -> String {
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
    private mutating func reference(into out: inout [UInt8]) throws(Declined) {
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

    private static let predefined: [(name: String, byte: UInt8)] = [
        ("lt", UInt8(ascii: "<")), ("gt", UInt8(ascii: ">")), ("amp", UInt8(ascii: "&")), ("quot", UInt8(ascii: "\"")), ("apos", UInt8(ascii: "'")),
    ]

    // MARK: Characters

    /// XML's characters only, in valid UTF-8.
    private func checkCharacters(_ range: Range<Int>) throws(Declined) {
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

    private static func isCharacter(_ scalar: UInt32) -> Bool {
        scalar == 0x09 || scalar == 0x0A || scalar == 0x0D || (0x20...0xD7FF).contains(scalar) || (0xE000...0xFFFD).contains(scalar)
            || (0x10000...0x10FFFF).contains(scalar)
    }

    /// Line ends as XML reads them: CR LF and a lone CR become LF.
    private static func normalized(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
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

    private static func digit(_ b: UInt8, radix: UInt32) -> UInt32? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return UInt32(b - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f") where radix == 16: return UInt32(b - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F") where radix == 16: return UInt32(b - UInt8(ascii: "A") + 10)
        default: return nil
        }
    }

    // MARK: Names

    /// A name of ASCII name characters (anything wider is libxml2's).
    private mutating func name() throws(Declined) -> Range<Int> {
        let start = i
        guard i < bytes.count, Self.isNameStart(bytes[i]) else { throw Declined() }
        i += 1
        while i < bytes.count, Self.isNameStart(bytes[i]) || Self.isNameRest(bytes[i]) { i += 1 }
        guard i < bytes.count, bytes[i] < 0x80, i - start <= Self.maxName else { throw Declined() }
        return start..<i
    }

    /// A name with at most one colon, neither first nor last.
    private mutating func qualifiedName() throws(Declined) -> Range<Int> {
        let name = try self.name()
        var colons = 0
        for index in name where bytes[index] == UInt8(ascii: ":") { colons += 1 }
        guard colons == 0 || (colons == 1 && bytes[name.lowerBound] != UInt8(ascii: ":") && bytes[name.upperBound - 1] != UInt8(ascii: ":"))
        else { throw Declined() }
        return name
    }

    private static func isNameStart(_ b: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(b) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(b)
            || b == UInt8(ascii: "_") || b == UInt8(ascii: ":")
    }

    private static func isNameRest(_ b: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b) || b == UInt8(ascii: "-") || b == UInt8(ascii: ".")
    }

    /// `xml` in any case, or `xmlns`: names XML keeps for itself.
    private static func isReserved(_ name: ArraySlice<UInt8>) -> Bool {
        name.count >= 3 && name.prefix(3).lazy.map { $0 | 0x20 }.elementsEqual("xml".utf8) && (name.count == 3 || name.elementsEqual("xmlns".utf8))
    }

    private static func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D }

    /// Whitespace skipped; whether there was any.
    private mutating func skipSpace() -> Bool {
        let start = i
        while i < bytes.count, Self.isSpace(bytes[i]) { i += 1 }
        return i > start
    }

    /// Two names' bytes equal, compared in place (slices of the array would each retain it).
    private func same(_ a: Range<Int>, _ b: Range<Int>) -> Bool {
        guard a.count == b.count else { return false }
        for offset in 0..<a.count where bytes[a.lowerBound + offset] != bytes[b.lowerBound + offset] { return false }
        return true
    }

    private func starts(with prefix: String.UTF8View) -> Bool {
        guard bytes.count - i >= prefix.count else { return false }
        var index = i
        for b in prefix {
            guard bytes[index] == b else { return false }
            index += 1
        }
        return true
    }

    private mutating func expect(_ b: UInt8) throws(Declined) {
        guard i < bytes.count, bytes[i] == b else { throw Declined() }
        i += 1
    }
}
