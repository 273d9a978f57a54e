import Rewriter

extension ValidatorSpec {
    /// This validator's answer for one try: `then` when its check holds,
    /// `otherwise` when not. A transport failure has no answer to check, so
    /// only the retry policy speaks for it. `body` parses the response body
    /// once for every JSON validator of the chain.
    func evaluate(_ outcome: TryOutcome, body: inout ParsedBody) -> Action {
        guard case .response(let status, let headers, _) = outcome else { return .next }
        return holds(status: status, headers: headers, body: &body) ? then : otherwise
    }

    private func holds(status: Int, headers: HeaderList, body: inout ParsedBody) -> Bool {
        switch check {
        case .status(let ranges):
            return ranges.contains { $0.contains(status) }
        case .header(let name, let condition):
            let values = headers.values(name)
            switch condition {
            case .present: return !values.isEmpty
            case .absent: return values.isEmpty
            case .equals(let expected): return values.contains(expected)
            case .matches(let pattern):
                return values.contains(where: pattern.wholeMatch)
            }
        case .json(let pointer, let condition):
            let value = body.json.flatMap { pointer.resolve(in: $0) }
            switch condition {
            case .present: return value != nil
            case .absent: return value == nil
            case .equals(let expected): return value == expected
            case .oneOf(let candidates): return value.map(candidates.contains) ?? false
            }
        case .notEmpty:
            return !(body.bytes ?? []).isEmpty
        }
    }
}

/// A try's response body for the validator chain, parsed as JSON at most
/// once however many validators read it.
struct ParsedBody {
    let bytes: [UInt8]?
    private var parsed: JSONValue??

    init(_ bytes: [UInt8]?) { self.bytes = bytes }

    /// The body as JSON; nil when there is none or it is not JSON (then
    /// nothing is at any pointer).
    var json: JSONValue? {
        mutating get {
            if let parsed { return parsed }
            let value = bytes.flatMap { try? JSONReader.parse($0) }
            parsed = .some(value)
            return value
        }
    }
}
