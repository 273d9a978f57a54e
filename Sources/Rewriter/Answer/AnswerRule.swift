/// A route's `response:` block: how the upstream's answer becomes the JSON
/// the client gets (the other half of `rewrite:`). Decoded first, then its
/// `errors` checked, then `pick`, then `fields`.
public struct AnswerRule: Sendable, Hashable {
    public enum Decode: String, Sendable, Hashable, CaseIterable {
        /// By the answer's Content-Type.
        case auto, json, xml, form
        /// Not decoded: the answer streams as it came.
        case none
    }

    public var decode: Decode
    public var namespaces: XMLDecoder.Namespaces
    /// Element paths from the root always decoded as arrays.
    public var arrays: Set<String> { didSet { arrayPaths = XMLArrayPaths(arrays) } }
    /// `arrays` as the decoder reads them, made once.
    public private(set) var arrayPaths: XMLArrayPaths
    /// The part of the decoded answer the client gets (nil: all of it).
    public var pick: JSONPointer?
    /// The client's object, key by key (nil: the picked part as it is).
    public var fields: [AnswerField]?
    public var errors: [AnswerError]

    public init(decode: Decode = .auto, namespaces: XMLDecoder.Namespaces = .strip, arrays: Set<String> = [], pick: JSONPointer? = nil,
                fields: [AnswerField]? = nil, errors: [AnswerError] = []) {
        self.decode = decode
        self.namespaces = namespaces
        self.arrays = arrays
        arrayPaths = XMLArrayPaths(arrays)
        self.pick = pick
        self.fields = fields
        self.errors = errors
    }
}

/// One key of the client's object, read from the picked part of the answer.
public struct AnswerField: Sendable, Hashable {
    public var name: String
    public var from: JSONPointer
    public var type: ParamType?
    public var required: Bool
    /// Always an array: one value becomes a list of one, a missing one the default.
    public var array: Bool
    public var defaultValue: JSONValue?

    public init(name: String, from: JSONPointer, type: ParamType? = nil, required: Bool = false, array: Bool = false,
                defaultValue: JSONValue? = nil) {
        self.name = name
        self.from = from
        self.type = type
        self.required = required
        self.array = array
        self.defaultValue = defaultValue
    }
}

/// A body-level error: when `when` is in the decoded answer, the client
/// gets `status` with a problem whose detail is read at `detail`.
public struct AnswerError: Sendable, Hashable {
    public var when: JSONPointer
    public var status: Int
    public var detail: JSONPointer?

    public init(when: JSONPointer, status: Int, detail: JSONPointer? = nil) {
        self.when = when
        self.status = status
        self.detail = detail
    }
}
