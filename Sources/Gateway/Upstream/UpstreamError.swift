/// Why an upstream try failed: a kind, a short `summary` a client may read,
/// and a `detail` (addresses, errno) for the log only.
public struct UpstreamError: Error, Sendable, Hashable, CustomStringConvertible {
    /// One set of names for config (`retry.on`), retry decisions, log
    /// outcomes, metric labels and problem types (`upstream-<kind>`).
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// The connection could not be made.
        case connectFailure = "connect-failure"
        /// The connection broke before the answer was whole.
        case reset
        /// No answer in time.
        case timeout
        /// An HTTP/2 upstream refused the stream unread.
        case refusedStream = "refused-stream"
        /// The built-in echo upstream has no connection.
        case unsupported
    }

    /// What kind of failure it was.
    public let kind: Kind
    /// For the log: addresses, errno, what the upstream sent.
    public let detail: String
    /// For the client: what went wrong, without internals.
    public let summary: String
    /// The kind's label.
    public var name: String { kind.rawValue }

    /// An error of `kind`; `summary` defaults to the kind's own words.
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

    /// The connection could not be made.
    public static func connectFailure(_ detail: String) -> UpstreamError { .init(kind: .connectFailure, detail: detail) }
    /// The connection closed or broke before the answer was whole.
    public static func reset(_ detail: String, summary: String? = nil) -> UpstreamError { .init(kind: .reset, detail: detail, summary: summary) }
    /// No answer within the try's or the call's time.
    public static func timeout(_ detail: String) -> UpstreamError { .init(kind: .timeout, detail: detail) }
    /// The HTTP/2 upstream refused the stream before reading it (safe to send again).
    public static func refusedStream(_ detail: String) -> UpstreamError { .init(kind: .refusedStream, detail: detail) }
    /// The built-in echo upstream cannot do this.
    public static func unsupported(_ detail: String) -> UpstreamError { .init(kind: .unsupported, detail: detail) }

    /// `kind: detail`.
    public var description: String { "\(name): \(detail)" }
}
