import Rewriter

/// One entry of a route's `validate` chain: a check on a try's outcome and
/// what to do when it holds (`then`) or not (`else`).
public struct ValidatorSpec: Sendable, Hashable {
    public enum Check: Sendable, Hashable {
        case status([ClosedRange<Int>])
        case header(name: String, HeaderCondition)
        case json(pointer: JSONPointer, JSONCondition)
        /// Holds when the body is not empty.
        case notEmpty
    }

    public enum HeaderCondition: Sendable, Hashable {
        case present, absent
        case equals(String)
        /// A regular expression that must match the whole value.
        case matches(Pattern)
    }

    /// A regular expression compiled once, when the config is read; equal
    /// to another when their sources are. Unchecked: a `Regex` is immutable
    /// once built (its program is lowered once, atomically), but its
    /// `AnyRegexOutput` type is not marked Sendable.
    public struct Pattern: @unchecked Sendable, Hashable, CustomStringConvertible {
        public let source: String
        let regex: Regex<AnyRegexOutput>

        public init(_ source: String) throws {
            self.source = source
            regex = try Regex(source)
        }

        public static func == (a: Pattern, b: Pattern) -> Bool { a.source == b.source }
        public func hash(into hasher: inout Hasher) { hasher.combine(source) }
        public var description: String { source }

        func wholeMatch(_ value: String) -> Bool { (try? regex.wholeMatch(in: value)) != nil }
    }

    public enum JSONCondition: Sendable, Hashable {
        case present, absent
        case equals(JSONValue)
        case oneOf([JSONValue])
    }

    public enum Action: Sendable, Hashable {
        case next, accept, fail, pass, retry
        case refresh(RefreshSpec)
    }

    public var check: Check
    public var then: Action
    public var otherwise: Action
    /// Shown in logs and in the problem response: `validate[1] (json /error)`.
    public var label: String

    public init(check: Check, then: Action = .next, otherwise: Action = .next, label: String) {
        self.check = check
        self.then = then
        self.otherwise = otherwise
        self.label = label
    }

    /// Whether the chain needs the response body buffered.
    public var readsBody: Bool {
        switch check {
        case .json, .notEmpty: true
        case .status, .header: false
        }
    }
}

/// "Call another request first" (a token refresh), capture a value from its
/// JSON answer into a header, then retry.
public struct RefreshSpec: Sendable, Hashable {
    public var upstream: String
    public var method: String
    public var path: String
    public var headers: HeaderRules
    public var body: JSONValue?
    public var capturePointer: JSONPointer
    public var captureHeader: String
    /// `{}` stands for the captured value: `Bearer {}`.
    public var format: String
    /// At most one refresh per this interval per route.
    public var minInterval: Duration
    /// `share: fleet`: one credential for every gatewayd on the store, kept there.
    public var share = StoreScope.local

    public init(
        upstream: String, method: String = "POST", path: String, headers: HeaderRules = HeaderRules(), body: JSONValue? = nil,
        capturePointer: JSONPointer, captureHeader: String, format: String = "{}", minInterval: Duration = .seconds(1)
    ) {
        self.upstream = upstream
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.capturePointer = capturePointer
        self.captureHeader = captureHeader
        self.format = format
        self.minInterval = minInterval
    }
}
