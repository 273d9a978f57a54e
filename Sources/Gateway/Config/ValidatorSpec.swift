import Rewriter

/// One entry of a route's `validate` chain: a check on a try's outcome and
/// what to do when it holds (`then`) or not (`else`).
public struct ValidatorSpec: Sendable, Hashable {
    /// What a validator looks at.
    public enum Check: Sendable, Hashable {
        /// The status is in one of the ranges.
        case status([ClosedRange<Int>])
        /// The named response field meets the condition.
        case header(name: String, HeaderCondition)
        /// The value the pointer reaches in the JSON answer meets the condition.
        case json(pointer: JSONPointer, JSONCondition)
        /// Holds when the body is not empty.
        case notEmpty
    }

    /// A condition on one response field.
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
        /// The expression as written in the config.
        public let source: String
        let regex: Regex<AnyRegexOutput>

        /// Compiles `source` (Swift Regex syntax); throws when it does not compile.
        public init(_ source: String) throws {
            self.source = source
            regex = try Regex(source)
        }

        /// Equal when written alike.
        public static func == (a: Pattern, b: Pattern) -> Bool { a.source == b.source }
        /// Hashes the source.
        public func hash(into hasher: inout Hasher) { hasher.combine(source) }
        /// The source.
        public var description: String { source }

        func wholeMatch(_ value: String) -> Bool { (try? regex.wholeMatch(in: value)) != nil }
    }

    /// A condition on the value a JSON pointer reaches in the answer.
    public enum JSONCondition: Sendable, Hashable {
        case present, absent
        case equals(JSONValue)
        case oneOf([JSONValue])
    }

    /// What a validator's `then` or `else` does with the try.
    public enum Action: Sendable, Hashable {
        /// `next`: the next validator decides; `accept`: the answer goes back as it is, the chain stops;
        /// `pass`: the same, for "not ours to judge"; `fail`: a 502 problem naming the validator;
        /// `retry`: the try is sent again when the route's retry policy allows.
        case next, accept, fail, pass, retry
        /// Call the refresh first, capture the credential, then retry.
        case refresh(RefreshSpec)
    }

    /// The check: `status`, `header`, `json` or `empty`.
    public var check: Check
    /// `then`: what happens when the check holds.
    public var then: Action
    /// `else`: what happens when it does not.
    public var otherwise: Action
    /// Shown in logs and in the problem response: `validate[1] (json /error)`.
    public var label: String

    /// A validator with `then` and `else` both `next` unless given.
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
    /// `upstream`: where the refresh call goes.
    public var upstream: String
    /// `method`: the refresh call's method.
    public var method: String
    /// `path`: the refresh call's path and query.
    public var path: String
    /// `headers`: set, added or removed on the refresh call.
    public var headers: HeaderRules
    /// `body`: the refresh call's JSON body.
    public var body: JSONValue?
    /// `capture.pointer`: where the credential is in the refresh's JSON answer.
    public var capturePointer: JSONPointer
    /// `capture.header`: the request field the credential goes into for the retry.
    public var captureHeader: String
    /// `{}` stands for the captured value: `Bearer {}`.
    public var format: String
    /// At most one refresh per this interval per route.
    public var minInterval: Duration
    /// `share: fleet`: one credential for every gatewayd on the store, kept there.
    public var share = StoreScope.local

    /// A refresh with `format` `{}` and one refresh per second at most.
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
