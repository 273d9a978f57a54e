/// An ordered list of header fields with ASCII case-insensitive names; the
/// case a name arrived with is kept (legacy services care).
public struct HeaderList: Sendable, Hashable, RandomAccessCollection, ExpressibleByDictionaryLiteral {
    public struct Field: Sendable, Hashable {
        public var name: String
        public var value: String
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    public private(set) var fields: [Field]
    /// A filter over the names present: the bit `nameBit` gives a field's
    /// name is set while the field is here (and may stay set after it goes).
    /// Most lookups on the data path are for names a message does not carry
    /// (Upgrade, Expect, X-Request-Id, the framing fields): a clear bit
    /// answers those without walking the fields.
    private var present: UInt64 = 0

    public init(_ fields: [Field] = []) {
        self.fields = fields
        for i in fields.indices { present |= Self.nameBit(fields[i].name) }
    }
    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements.map { Field(name: $0.0, value: $0.1) })
    }

    /// Equal fields in the same order: the filter is not part of the value.
    public static func == (a: HeaderList, b: HeaderList) -> Bool { a.fields == b.fields }
    public func hash(into hasher: inout Hasher) { hasher.combine(fields) }

    /// One of 64 bits for a name: its length's (names equal as `equalNames`
    /// says have equal lengths). Reading a string's length costs a few
    /// instructions; hashing its first byte too cost more than the walks it saved.
    @usableFromInline
    static func nameBit(_ name: String) -> UInt64 { 1 << UInt64(name.utf8.count & 63) }

    /// Whether a field named `name` may be here: false means it is not.
    func mayContain(_ name: String) -> Bool { present & Self.nameBit(name) != 0 }

    /// The filter's bits for `names`, for `mayContain(anyOf:)`.
    public static func nameBits(_ names: [String]) -> UInt64 { names.reduce(0) { $0 | nameBit($1) } }

    /// Whether a field with one of the names `bits` stands for may be here.
    public func mayContain(anyOf bits: UInt64) -> Bool { present & bits != 0 }

    public var startIndex: Int { fields.startIndex }
    public var endIndex: Int { fields.endIndex }
    public subscript(position: Int) -> Field { fields[position] }

    /// The first value of `name`.
    public subscript(name: String) -> String? {
        firstIndex(named: name).map { fields[$0].value }
    }

    public func values(_ name: String) -> [String] {
        var values: [String] = []
        forEachValue(named: name) { values.append($0) }
        return values
    }

    /// Every value of `name`, in order, without collecting them first.
    public func forEachValue<E: Error>(named name: String, _ body: (String) throws(E) -> Void) throws(E) {
        var next = firstIndex(named: name)
        while let i = next {
            try body(fields[i].value)
            next = firstIndex(named: name, from: i + 1)
        }
    }

    public func contains(_ name: String) -> Bool { firstIndex(named: name) != nil }

    /// Where the first field named `name` is, from `start` on. Lookups walk
    /// the fields in place: a loop over the list (or `first(where:)`) copies
    /// each field, two string retains and releases, which on the data path
    /// cost more than the comparisons.
    public func firstIndex(named name: String, from start: Int = 0) -> Int? {
        guard mayContain(name) else { return nil }
        return fields.withUnsafeBufferPointer { fields in
            var i = start
            while i < fields.count {
                if Self.equalNames(fields[i].name, name) { return i }
                i += 1
            }
            return nil
        }
    }

    /// Where the first field named `name`, given as UTF-8 bytes, is: a name
    /// a filter asks for is looked up in its memory without making a string of it.
    public func firstIndex(named name: UnsafeRawBufferPointer) -> Int? {
        guard present & 1 << UInt64(name.count & 63) != 0 else { return nil }
        return fields.withUnsafeBufferPointer { fields in
            for i in fields.indices where Self.equalNames(fields[i].name, name) { return i }
            return nil
        }
    }

    /// The fields in place, for loops by index (`for field in list` copies each).
    @inlinable
    public func withFields<R>(_ body: (UnsafeBufferPointer<Field>) throws -> R) rethrows -> R {
        try fields.withUnsafeBufferPointer(body)
    }

    /// Room for `count` fields in all, so that adding them grows the list once.
    public mutating func reserveCapacity(_ count: Int) { fields.reserveCapacity(count) }

    public mutating func add(_ name: String, _ value: String) {
        fields.append(Field(name: name, value: value))
        present |= Self.nameBit(name)
    }

    /// Replaces every field named `name` by one, at the first one's position.
    public mutating func set(_ name: String, _ value: String) {
        guard let first = firstIndex(named: name) else {
            add(name, value)
            return
        }
        fields[first].value = value
        fields[first].name = name
        removeFields(named: name, from: first + 1)
    }

    public mutating func remove(at index: Int) { fields.remove(at: index) }

    public mutating func remove(_ name: String) {
        // Absent (the usual case): no mutation, so no copy of a shared list.
        guard let first = firstIndex(named: name) else { return }
        removeFields(named: name, from: first)
    }

    /// One walk from `start`, in place.
    private mutating func removeFields(named name: String, from start: Int) {
        var next = firstIndex(named: name, from: start)
        while let i = next {
            fields.remove(at: i)
            next = firstIndex(named: name, from: i)
        }
    }

    /// Removes the fields `predicate` picks, keeping the order of the rest;
    /// a list where it picks none is left as it is (not copied when shared).
    public mutating func removeAll(where predicate: (Field) -> Bool) {
        guard let first = fields.withUnsafeBufferPointer({ fields in fields.indices.first { predicate(fields[$0]) } }) else { return }
        let kept = fields.withUnsafeMutableBufferPointer { fields in
            var kept = first
            for i in (first + 1)..<fields.count where !predicate(fields[i]) {
                fields.swapAt(kept, i)
                kept += 1
            }
            return kept
        }
        fields.removeSubrange(kept...)
    }

    @inlinable
    public static func equalNames(_ a: String, _ b: String) -> Bool {
        guard a.utf8.count == b.utf8.count else { return false }
        // Byte loops over contiguous UTF-8 (every native string): a generic
        // zip over two UTF8Views was the hottest leaf of header handling.
        if let equal = b.utf8.withContiguousStorageIfAvailable({ equalNames(a, UnsafeRawBufferPointer($0)) }) { return equal }
        return zip(a.utf8, b.utf8).allSatisfy(sameLetter)
    }

    @inlinable
    public static func equalNames(_ a: String, _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.utf8.count == b.count else { return false }
        if let equal = a.utf8.withContiguousStorageIfAvailable({ x in
            for i in 0..<x.count where !sameLetter(x[i], b[i]) { return false }
            return true
        }) { return equal }
        return zip(a.utf8, b).allSatisfy(sameLetter)
    }

    /// Equal bytes, or the two cases of one ASCII letter.
    @inlinable
    public static func sameLetter(_ x: UInt8, _ y: UInt8) -> Bool {
        x == y || (x | 0x20 == y | 0x20 && (x | 0x20) &- 0x61 < 26)
    }

    /// RFC 9110 token characters. Read as contiguous bytes against a bit
    /// table: a filter's every written field is checked on the call's path.
    public static func isValidName(_ name: String) -> Bool {
        var name = name
        let (low, high) = tokenBits
        return name.withUTF8 { bytes in
            guard !bytes.isEmpty else { return false }
            for byte in bytes {
                let word = byte < 64 ? low : byte < 128 ? high : 0
                if word >> UInt64(byte & 63) & 1 == 0 { return false }
            }
            return true
        }
    }

    /// Whether one byte is an RFC 9110 token character.
    public static func isTokenByte(_ byte: UInt8) -> Bool {
        let word = byte < 64 ? tokenBits.0 : byte < 128 ? tokenBits.1 : 0
        return word >> UInt64(byte & 63) & 1 != 0
    }

    /// The token bytes below 64 and from 64 to 127, one bit each.
    private static let tokenBits: (UInt64, UInt64) = {
        var bits: (UInt64, UInt64) = (0, 0)
        for byte in "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8 {
            if byte < 64 { bits.0 |= 1 << UInt64(byte) } else { bits.1 |= 1 << UInt64(byte - 64) }
        }
        return bits
    }()

    /// A value must not be able to split or end a header: no CR, LF or NUL.
    public static func isValidValue(_ value: String) -> Bool {
        var value = value
        return value.withUTF8 { bytes in !bytes.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0 } }
    }
}
