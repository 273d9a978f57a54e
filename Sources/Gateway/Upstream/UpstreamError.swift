/// Why an upstream try failed: a kind, a short `summary` a client may read,
/// and a `detail` (addresses, errno) for the log only.
public struct UpstreamError: Error, Sendable, Hashable, CustomStringConvertible {
    /// One set of names for config (`retry.on`), retry decisions, log
    /// outcomes, metric labels and problem types (`upstream-<kind>`).
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        case connectFailure = "connect-failure"
        case reset
        case timeout
        case refusedStream = "refused-stream"
        /// The built-in echo upstream has no connection.
        case unsupported
    }

    public let kind: Kind
    public let detail: String
    public let summary: String
    /// The kind's label.
    public var name: String { kind.rawValue }

    public init(kind: Kind, detail: String, summary: String? = nil) {
        self.kind = kind
        self.detail = detail
        let byKind = switch kind {
        case .connectFailure: "could not connect"
        case .reset: "the connection closed before a complete response"
        case .timeout: "no response in time"
        case .refusedStream: "the stream was refused"
        case .unsupported: "not reachable over a connection"
        }
        self.summary = summary ?? byKind
    }

    public static func connectFailure(_ detail: String) -> UpstreamError { .init(kind: .connectFailure, detail: detail) }
    public static func reset(_ detail: String, summary: String? = nil) -> UpstreamError { .init(kind: .reset, detail: detail, summary: summary) }
    public static func timeout(_ detail: String) -> UpstreamError { .init(kind: .timeout, detail: detail) }
    public static func refusedStream(_ detail: String) -> UpstreamError { .init(kind: .refusedStream, detail: detail) }
    public static func unsupported(_ detail: String) -> UpstreamError { .init(kind: .unsupported, detail: detail) }

    public var description: String { "\(name): \(detail)" }
}
