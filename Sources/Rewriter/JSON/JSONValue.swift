/// A JSON value that keeps what a gateway must not lose: object key order and
/// each number's original spelling (`1.0` stays `1.0`, `1e3` stays `1e3`).
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    /// The number as spelled in the source; always valid RFC 8259 number syntax.
    case number(String)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    public var isScalar: Bool {
        switch self {
        case .array, .object: false
        default: true
        }
    }

    /// Short name of the JSON type, for error messages.
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .number: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }
}

/// An ordered JSON object. Lookups are linear: parameter objects are small,
/// and keeping one array keeps order, renames and in-place overwrites cheap.
public struct JSONObject: Sendable, Hashable, RandomAccessCollection {
    public struct Member: Sendable, Hashable {
        public var key: String
        public var value: JSONValue
        public init(key: String, value: JSONValue) {
            self.key = key
            self.value = value
        }
    }

    public private(set) var members: [Member]

    public init() { members = [] }
    public init(reservingCapacity capacity: Int) {
        members = []
        members.reserveCapacity(capacity)
    }
    public init(_ members: [Member]) { self.members = members }
    public init(_ pairs: KeyValuePairs<String, JSONValue>) {
        members = pairs.map { Member(key: $0.key, value: $0.value) }
    }

    public var startIndex: Int { members.startIndex }
    public var endIndex: Int { members.endIndex }
    public subscript(position: Int) -> Member { members[position] }

    public func index(forKey key: String) -> Int? {
        members.firstIndex { $0.key == key }
    }

    /// Reading returns the value; writing overwrites in place or appends;
    /// writing `nil` removes the key.
    public subscript(key: String) -> JSONValue? {
        get { index(forKey: key).map { members[$0].value } }
        set {
            if let i = index(forKey: key) {
                if let newValue { members[i].value = newValue } else { members.remove(at: i) }
            } else if let newValue {
                members.append(Member(key: key, value: newValue))
            }
        }
    }

    /// Appends without checking for an existing key (the caller knows it is new).
    public mutating func append(_ key: String, _ value: JSONValue) {
        members.append(Member(key: key, value: value))
    }

    public mutating func setValue(_ value: JSONValue, at index: Int) {
        members[index].value = value
    }

    /// Renames the key at `index`, dropping any other member already named `newKey`.
    public mutating func renameKey(at index: Int, to newKey: String) {
        var index = index
        if let other = self.index(forKey: newKey), other != index {
            members.remove(at: other)
            if other < index { index -= 1 }
        }
        members[index].key = newKey
    }

    @discardableResult
    public mutating func removeValue(forKey key: String) -> JSONValue? {
        guard let i = index(forKey: key) else { return nil }
        return members.remove(at: i).value
    }

    /// Members sorted by the UTF-8 bytes of their keys.
    public func sortedByKey() -> [Member] {
        members.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
    }
}

// Deliberately not ExpressibleByNilLiteral: `nil` must always mean Optional.none.
extension JSONValue: ExpressibleByStringLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByIntegerLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int) { self = .number(String(value)) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(JSONObject(elements.map { JSONObject.Member(key: $0.0, value: $0.1) }))
    }
}
