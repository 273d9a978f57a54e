import Rewriter

/// What one upstream try came to: a response (head, and the body when a
/// validator reads it) or a transport failure.
public enum TryOutcome: Sendable {
    case response(status: Int, headers: HeaderList, body: [UInt8]?)
    case failure(UpstreamError)

    /// The answer's status (nil: a failure).
    var status: Int? {
        if case .response(let status, _, _) = self { return status }
        return nil
    }

    var body: [UInt8]? {
        if case .response(_, _, let body) = self { return body }
        return nil
    }
}
