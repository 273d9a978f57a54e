/// The XML decoder's fast path, written by hand because a benchmark says so:
/// libxml2's pull reader alone took 8.5 µs of a 2 KB SOAP answer's 19
/// (docs/benchmarks.md), more than the whole translation may cost beside a
/// pass-through. It reads what legacy services send (UTF-8, no DTD, ASCII
/// names, declared prefixes) in one pass over the bytes, each index compared
/// with the count before it is read, and declines everything else (another
/// encoding, a DOCTYPE, an unknown entity, any doubt about well-formedness)
/// to libxml2, whose verdict then stands. The fuzz target FuzzXML holds both
/// to the same document on every input this path accepts. The answer is read
/// through a buffer pointer, valid for the whole scan (each slice of an array
/// retained it: retain and release were a fifth of the scan); the pointer's
/// subscript is checked in debug builds, where FuzzXML runs under AddressSanitizer.
struct XMLScanner {
    /// Not read here: libxml2 decides.
    struct Declined: Error {}

    let bytes: UnsafeBufferPointer<UInt8>
    private let namespaces: XMLDecoder.Namespaces
    var i = 0
    var builder: XMLTreeBuilder
    /// Open elements' qualified names, for their end tags.
    private var open: [Range<Int>] = []
    /// Declared prefixes in scope, each with the depth of the element declaring it.
    private var prefixes: [(name: Range<Int>, depth: Int)] = []
    /// The tag being read's attributes (kept between tags for their capacity).
    /// `declared`: an `xmlns` attribute's prefix (`.some(nil)` for the default namespace), nil for any other.
    private var attributes: [(name: Range<Int>, declared: Range<Int>??, value: String)] = []

    /// libxml2's own limits: past them its verdict differs from a plain read.
    static let maxDocument = 10_000_000, maxName = 50_000
    private static let maxAttributes = 32

    static func decode(_ bytes: [UInt8], namespaces: XMLDecoder.Namespaces, arrays: XMLArrayPaths, maxDepth: Int) -> JSONValue? {
        guard bytes.count < maxDocument else { return nil }
        return bytes.withUnsafeBufferPointer { buffer in
            var scanner = XMLScanner(bytes: buffer, namespaces: namespaces, builder: XMLTreeBuilder(arrays: arrays, maxDepth: maxDepth))
            return try? scanner.document()
        }
    }

    private init(bytes: UnsafeBufferPointer<UInt8>, namespaces: XMLDecoder.Namespaces, builder: XMLTreeBuilder) {
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

    /// `<!-- -->`: skipped; `--` anywhere but at its end is refused.
    private mutating func comment() throws(Declined) {
        i += 4
        let start = i
        let dashes = try find("--".utf8)
        guard dashes + 2 < bytes.count, bytes[dashes + 2] == UInt8(ascii: ">") else { throw Declined() }
        try checkCharacters(start..<dashes)
        i = dashes + 3
    }

    /// `<?target data?>`: skipped; an `xml` target past the start is refused.
    private mutating func instruction() throws(Declined) {
        i += 2
        let target = try name()
        guard !Self.isReserved(bytes[target]), !bytes[target].contains(UInt8(ascii: ":")) else { throw Declined() }
        if starts(with: "?>".utf8) { i += 2; return }
        guard skipSpace() else { throw Declined() }
        let start = i
        let end = try find("?>".utf8)
        try checkCharacters(start..<end)
        i = end + 2
    }

    private mutating func cdata() throws(Declined) {
        i += 9
        let start = i
        let end = try find("]]>".utf8)
        try checkCharacters(start..<end)
        appendText(start..<end)
        i = end + 3
    }

    /// Where `terminator` next starts, from `i`; a document that ends first is libxml2's to refuse.
    private func find(_ terminator: String.UTF8View) throws(Declined) -> Int {
        var index = i
        while index + terminator.count <= bytes.count {
            if starts(with: terminator, at: index) { return index }
            index += 1
        }
        throw Declined()
    }

    // MARK: Elements

    private mutating func startTag() throws(Declined) {
        i += 1
        let qualified = try qualifiedName()
        if !attributes.isEmpty { attributes.removeAll(keepingCapacity: true) }
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
            attributes.append((name, declaredPrefix(name), value))
        }
        let depth = builder.depth + 1
        // Declarations first: they scope the element's own name and attributes.
        for attribute in attributes {
            guard case .some(.some(let prefix)) = attribute.declared else { continue }
            guard !attribute.value.isEmpty, !Self.isReserved(bytes[prefix]) else { throw Declined() }
            prefixes.append((prefix, depth))
        }
        let element = try local(qualified)
        guard builder.open(String(decoding: bytes[namespaces == .keep ? qualified : element], as: UTF8.self)) == nil else { throw Declined() }
        open.append(qualified)
        // libxml2's reader gives namespace declarations before the other attributes.
        if namespaces == .keep {
            for attribute in attributes where attribute.declared != nil {
                builder.attribute(String(decoding: bytes[attribute.name], as: UTF8.self), attribute.value)
            }
        }
        var locals: [Range<Int>] = []
        for attribute in attributes where attribute.declared == nil {
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
        guard prefixes.contains(where: { same($0.name, prefix) }) || bytes[prefix].elementsEqual("xml".utf8) else { throw Declined() }
        return colon + 1..<name.upperBound
    }
}
