import Rewriter

extension ValidatorSpec {
    /// This validator's answer for one try: `then` when its check holds,
    /// `otherwise` when not. A transport failure has no answer to check, so
    /// only the retry policy speaks for it.
    func evaluate(_ outcome: TryOutcome) -> Action {
        guard case .response(let status, let headers, let body) = outcome else { return .next }
        return holds(status: status, headers: headers, body: body) ? then : otherwise
    }

    private func holds(status: Int, headers: HeaderList, body: [UInt8]?) -> Bool {
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
                guard let regex = try? Regex(pattern) else { return false }
                return values.contains { (try? regex.wholeMatch(in: $0)) != nil }
            }
        case .json(let pointer, let condition):
            // A body that is not JSON has nothing at any pointer.
            let value = body.flatMap { try? JSONReader.parse($0) }.flatMap { pointer.resolve(in: $0) }
            switch condition {
            case .present: return value != nil
            case .absent: return value == nil
            case .equals(let expected): return value == expected
            case .oneOf(let candidates): return value.map(candidates.contains) ?? false
            }
        case .notEmpty:
            return !(body ?? []).isEmpty
        }
    }
}
