import Gateway

/// Signs every request that goes upstream.
public struct Sign: RequestModifier {
    public init() {}

    public func modify(_ request: inout UpstreamRequest, context: ModifierContext) async throws {
        request.headers.set("X-Signature", "signed:\(request.method) \(request.target)")
    }
}

/// Refuses answers the upstream marks as stale (a 502 names this validator).
public struct RefuseStale: ResponseValidator {
    public init() {}

    public func validate(_ outcome: TryOutcome, route: String) -> ValidatorSpec.Action {
        guard case .response(_, let headers, _) = outcome, headers["X-Stale"] != nil else { return .next }
        return .fail
    }
}
