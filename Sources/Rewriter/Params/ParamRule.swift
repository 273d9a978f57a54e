/// One entry of a route's keyed `params` mapping (KeyedAPIParameters' idea,
/// configured): rename, type, default, constant, required.
public struct ParamRule: Sendable, Hashable {
    public var name: String
    /// The convenience key to read; nil means `name` itself.
    public var from: String?
    public var type: ParamType?
    public var defaultValue: JSONValue?
    /// A constant: always sent, whatever the client said.
    public var value: JSONValue?
    public var required: Bool

    public init(
        name: String, from: String? = nil, type: ParamType? = nil, defaultValue: JSONValue? = nil,
        value: JSONValue? = nil, required: Bool = false
    ) {
        self.name = name
        self.from = from
        self.type = type
        self.defaultValue = defaultValue
        self.value = value
        self.required = required
    }
}

public enum ParamType: String, Sendable, Hashable, CaseIterable {
    case int, number, bool, string
    case timestampMs = "timestamp_ms"
    /// A multipart file part: a `data:` URI or `{filename, content_type, base64}`.
    case file
}
