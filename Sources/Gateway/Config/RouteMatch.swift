import Rewriter

/// When a route applies: methods, path (exact, prefix or pattern with
/// `{captures}`), host and header values. Everything left out matches.
public struct RouteMatch: Sendable, Hashable {
    public enum Path: Sendable, Hashable {
        case any
        case exact(String)
        case prefix(String)
        case pattern(PathPattern)
    }

    public var methods: [String]?
    public var path: Path
    /// Exact host (case-insensitive, port ignored) or `*.suffix`.
    public var host: String?
    public var headers: [HeaderList.Field]

    public init(methods: [String]? = nil, path: Path = .any, host: String? = nil, headers: [HeaderList.Field] = []) {
        self.methods = methods
        self.path = path
        self.host = host
        self.headers = headers
    }
}

/// `/users/{id}/posts/{post}`: each `{name}` captures one whole path segment.
public struct PathPattern: Sendable, Hashable {
    public enum Segment: Sendable, Hashable {
        case literal(String)
        case capture(String)
    }
    public let source: String
    public let segments: [Segment]

    /// nil when a segment mixes text and a capture or a capture name is invalid.
    public init?(_ source: String) {
        guard source.hasPrefix("/") else { return nil }
        var segments: [Segment] = []
        for part in source.dropFirst().split(separator: "/", omittingEmptySubsequences: false) {
            if part.hasPrefix("{") && part.hasSuffix("}") && part.count > 2 {
                let name = part.dropFirst().dropLast()
                guard name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) else { return nil }
                segments.append(.capture(String(name)))
            } else {
                guard !part.contains("{") && !part.contains("}") else { return nil }
                segments.append(.literal(String(part)))
            }
        }
        self.source = source
        self.segments = segments
    }

    public var hasCaptures: Bool { segments.contains { if case .capture = $0 { true } else { false } } }
}
