extension Array where Element == ParamRule {
    /// Applies the keyed mapping in order. A renamed key keeps its source's
    /// position, a constant overwrites in place, missing defaults and constants
    /// are appended in `params` order; keys no rule names pass through.
    /// `input` is consumed: the caller's only copy is edited in place.
    public func apply(to input: consuming JSONObject) throws(RewriteError) -> JSONObject {
        var object = input
        for rule in self {
            if let constant = rule.value {
                object[rule.name] = constant
                continue
            }
            let source = rule.from ?? rule.name
            guard let index = object.index(forKey: source), object[index].value != .null || !rule.required else {
                if let fallback = rule.defaultValue {
                    object[rule.name] = fallback
                } else if rule.required {
                    let detail = rule.from.map { "required parameter '\($0)' (sent upstream as '\(rule.name)') is missing" }
                        ?? "required parameter '\(rule.name)' is missing"
                    throw RewriteError(.missingParameter, key: source, detail: detail)
                }
                continue
            }
            var position = index
            if source != rule.name {
                object.renameKey(at: index, to: rule.name)
                position = object.index(forKey: rule.name)!
            }
            if let type = rule.type {
                let value = object[position].value
                guard let converted = type.convert(value) else {
                    throw RewriteError(
                        .invalidParameter, key: source,
                        detail: "parameter '\(source)' must be \(type.expectation), got \(value.typeName) \(JSONWriter.string(value).prefix(64))")
                }
                object.setValue(converted, at: position)
            }
        }
        return object
    }
}

extension ParamType {
    var expectation: String {
        switch self {
        case .int: "an integer"
        case .number: "a number"
        case .bool: "a boolean (true, false, 1 or 0)"
        case .string: "a string, number or boolean"
        case .timestampMs: "an ISO 8601 date-time (e.g. 2024-05-01T12:30:00Z) or integer epoch milliseconds"
        case .file: "a data: URI or an object {filename, content_type, base64}"
        }
    }
}
