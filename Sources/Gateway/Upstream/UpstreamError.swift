/// Why an upstream try failed; `name` is a low-cardinality label for logs
/// and metrics, and decides retry conditions later.
public struct UpstreamError: Error, Sendable, Hashable, CustomStringConvertible {
    public let name: String
    public let detail: String

    public static func connectFailure(_ detail: String) -> UpstreamError { .init(name: "connect-failure", detail: detail) }
    public static func reset(_ detail: String) -> UpstreamError { .init(name: "reset", detail: detail) }
    public static func timeout(_ detail: String) -> UpstreamError { .init(name: "timeout", detail: detail) }
    public static func refusedStream(_ detail: String) -> UpstreamError { .init(name: "refused-stream", detail: detail) }
    public static func unsupported(_ detail: String) -> UpstreamError { .init(name: "unsupported", detail: detail) }

    public var description: String { "\(name): \(detail)" }
}
