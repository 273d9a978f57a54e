/// How parameters are written into a query string or a form body
/// (`rewrite.query` in the config). Defaults as docs/translation.md states.
public struct QueryOptions: Sendable, Hashable {
    public enum Arrays: String, Sendable, CaseIterable { case brackets, indices, `repeat`, comma }
    public enum Booleans: String, Sendable, CaseIterable { case numbers, literals }
    public enum Nested: String, Sendable, CaseIterable { case brackets, dots }
    public enum Nulls: String, Sendable, CaseIterable { case omit, empty, bare }
    public enum Spaces: String, Sendable, CaseIterable { case percent, plus }
    public enum Order: String, Sendable, CaseIterable { case preserve, sorted }

    public var arrays: Arrays
    public var booleans: Booleans
    public var nested: Nested
    public var nulls: Nulls
    /// nil: the place decides (`percent` in a query, `plus` in a form body).
    public var spaces: Spaces?
    public var order: Order

    public init(
        arrays: Arrays = .brackets, booleans: Booleans = .numbers, nested: Nested = .brackets,
        nulls: Nulls = .omit, spaces: Spaces? = nil, order: Order = .preserve
    ) {
        self.arrays = arrays
        self.booleans = booleans
        self.nested = nested
        self.nulls = nulls
        self.spaces = spaces
        self.order = order
    }

    /// The text a scalar becomes in a query, form or multipart value; nil for null.
    public func text(of scalar: JSONValue) -> String? {
        switch scalar {
        case .string(let s): s
        case .number(let n): n
        case .bool(let b): booleans == .numbers ? (b ? "1" : "0") : (b ? "true" : "false")
        case .null: nil
        case .array, .object: nil
        }
    }
}
