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

    public var hasCaptures: Bool { !captureNames.isEmpty }

    public var captureNames: [String] { segments.compactMap { if case .capture(let name) = $0 { name } else { nil } } }
}

extension RouteConfig {
    /// `target` with the `match.prefix` it starts with replaced by
    /// `rewrite.prefix` (the rest kept, repeated slashes merged as in the
    /// client's path); unchanged when the route replaces no prefix.
    func replacingPrefix(of target: String) -> String {
        guard let replacement = prefixRewrite, case .prefix(let prefix) = match.path, target.hasPrefix(prefix) else { return target }
        let replaced = replacement + target.dropFirst(prefix.count)
        let queryStart = replaced.firstIndex(of: "?") ?? replaced.endIndex
        return String(PathNormalization.normalize(replaced[..<queryStart])) + replaced[queryStart...]
    }
}
