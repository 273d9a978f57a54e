import Rewriter

/// When a route applies: methods, path (exact, prefix or pattern with
/// `{captures}`), host and header values. Everything left out matches.
public struct RouteMatch: Sendable, Hashable {
    /// `match`'s path: `exact`, `prefix`, or `path` with `{captures}`.
    public enum Path: Sendable, Hashable {
        /// Any path.
        case any
        /// This path and no other.
        case exact(String)
        /// Paths that start with this.
        case prefix(String)
        /// Paths of this shape, each `{name}` one segment.
        case pattern(PathPattern)
    }

    /// `methods`: the methods the route serves (nil: all).
    public var methods: [String]?
    /// How the path must look.
    public var path: Path
    /// Exact host (case-insensitive, port ignored) or `*.suffix`.
    public var host: String?
    /// `headers`: fields a request must carry with these values.
    public var headers: [HeaderList.Field]

    /// A match of everything unless narrowed.
    public init(methods: [String]? = nil, path: Path = .any, host: String? = nil, headers: [HeaderList.Field] = []) {
        self.methods = methods
        self.path = path
        self.host = host
        self.headers = headers
    }
}

/// `/users/{id}/posts/{post}`: each `{name}` captures one whole path segment.
public struct PathPattern: Sendable, Hashable {
    /// One `/`-separated piece of the pattern.
    public enum Segment: Sendable, Hashable {
        /// A segment that must be this text.
        case literal(String)
        /// `{name}`: any one segment, captured as `name`.
        case capture(String)
    }
    /// The pattern as written.
    public let source: String
    /// Its segments, in order.
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

    /// Whether any segment captures.
    public var hasCaptures: Bool { !captureNames.isEmpty }

    /// The capture names, in order.
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
