extension ParamType {
    /// Converts `value` to this type; nil when it does not convert. Null passes
    /// through (a null is "no value", whatever the type).
    /// An array converts element by element (`ids=1&ids=2` as `int` is `[1, 2]`).
    public func convert(_ value: JSONValue) -> JSONValue? {
        if case .null = value { return .null }
        if case .array(let elements) = value, self != .file {
            var converted: [JSONValue] = []
            converted.reserveCapacity(elements.count)
            for element in elements {
                guard case let item? = convert(element) else { return nil }
                converted.append(item)
            }
            return .array(converted)
        }
        switch self {
        case .string:
            switch value {
            case .string: return value
            case .number(let n): return .string(n)
            case .bool(let b): return .string(b ? "true" : "false")
            default: return nil
            }
        case .int:
            switch value {
            case .number(let n): return Self.integerSpelling(n).map(JSONValue.number)
            case .string(let s): return Self.integerSpelling(s).map(JSONValue.number)
            default: return nil
            }
        case .number:
            switch value {
            case .number: return value
            case .string(let s): return Self.isJSONNumber(s) ? .number(Self.shortestSpelling(s)) : nil
            default: return nil
            }
        case .bool:
            switch value {
            case .bool: return value
            case .string("true"), .string("1"), .number("1"): return .bool(true)
            case .string("false"), .string("0"), .number("0"): return .bool(false)
            default: return nil
            }
        case .timestampMs:
            switch value {
            case .number(let n): return Self.integerSpelling(n).map(JSONValue.number)
            case .string(let s): return ISO8601.millisecondsSince1970(s).map { .number(String($0)) }
            default: return nil
            }
        case .file:
            return FileValue(value) == nil ? nil : value
        }
    }

    /// An optional `-` and digits, with leading zeros dropped (`007` -> `7`,
    /// `-0` -> `0`); digits beyond 64 bits are kept exactly.
    static func integerSpelling(_ s: String) -> String? {
        var utf8 = Substring(s).utf8
        let negative = utf8.first == UInt8(ascii: "-")
        if negative { utf8 = utf8.dropFirst() }
        guard !utf8.isEmpty, utf8.allSatisfy(isDigit) else { return nil }
        let digits = utf8.drop { $0 == UInt8(ascii: "0") }
        if digits.isEmpty { return "0" }
        return (negative ? "-" : "") + String(Substring(digits))
    }

    /// A number that came as text is written as a plain integer, or else as
    /// the shortest decimal that reads back as the same double (`2.50` -> `2.5`).
    static func shortestSpelling(_ s: String) -> String {
        if let integer = integerSpelling(s) { return integer }
        guard let double = Double(s), double.isFinite else { return s }
        // A plain conversion, not Int64(exactly:) or rounded(), which need libm.
        if abs(double) < 1e15, Double(Int64(double)) == double { return String(Int64(double)) }
        return "\(double)"
    }

    static func isJSONNumber(_ s: String) -> Bool {
        guard let parsed = try? JSONReader.parse(s), case .number(let n) = parsed else { return false }
        return n == s
    }
}
