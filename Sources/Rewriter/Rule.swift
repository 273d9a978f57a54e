/// A route's `rewrite` section, compiled: how convenience parameters become
/// the actual parameters of the upstream request.
public struct Rule: Sendable, Hashable {
    /// Where convenience parameters come from.
    public enum Source: String, Sendable, CaseIterable { case auto, body, query }
    /// Where (and how) the remaining parameters go.
    public enum Encoding: String, Sendable, CaseIterable { case auto, query, json, form, multipart, xml }

    public var method: String?
    public var path: URITemplate?
    public var from: Source
    public var encoding: Encoding
    public var query: QueryOptions
    public var params: [ParamRule]
    /// When set, replaces the derived query (an empty object means no query).
    public var actualQuery: JSONObject?
    /// When set, replaces the derived body.
    public var actualBody: JSONValue?
    public var maxJSONDepth: Int
    /// `encoding: xml`: the root, its namespaces and the SOAP envelope.
    public var xml: XMLEncoder?

    public init(
        method: String? = nil, path: URITemplate? = nil, from: Source = .auto, encoding: Encoding = .auto,
        query: QueryOptions = QueryOptions(), params: [ParamRule] = [], actualQuery: JSONObject? = nil,
        actualBody: JSONValue? = nil, maxJSONDepth: Int = JSONReader.defaultMaxDepth
    ) {
        self.method = method
        self.path = path
        self.from = from
        self.encoding = encoding
        self.query = query
        self.params = params
        self.actualQuery = actualQuery
        self.actualBody = actualBody
        self.maxJSONDepth = maxJSONDepth
    }

    /// The place parameters go for an upstream `method` (APIKit's rule for `auto`).
    public func placement(for method: String) -> Encoding {
        guard encoding == .auto else { return encoding }
        switch method {
        case "GET", "HEAD", "DELETE": return .query
        default: return .json
        }
    }
}

/// What the Rewriter needs to know of a client's request.
public struct IncomingRequest: Sendable {
    public var method: String
    /// The raw (still percent-encoded) path, without the query.
    public var path: String
    /// The raw query, without `?`; nil when the target had none.
    public var query: String?
    public var contentType: String?
    public var body: [UInt8]
    /// Path captures from the route's pattern, already percent-decoded.
    public var captures: [(name: String, value: String)]

    public init(
        method: String, path: String, query: String? = nil, contentType: String? = nil, body: [UInt8] = [],
        captures: [(name: String, value: String)] = []
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.contentType = contentType
        self.body = body
        self.captures = captures
    }

    /// Splits an origin-form target at the first `?`.
    public init(method: String, target: String, contentType: String? = nil, body: [UInt8] = []) {
        if let q = target.utf8.firstIndex(of: UInt8(ascii: "?")) {
            self.init(method: method, path: String(target[..<q]), query: String(target[target.utf8.index(after: q)...]),
                      contentType: contentType, body: body)
        } else {
            self.init(method: method, path: target, contentType: contentType, body: body)
        }
    }
}

/// The translated request line and body; headers are layered by the caller.
public struct RewrittenRequest: Sendable, Hashable {
    public var method: String
    /// Path and query, relative to the upstream's base URL.
    public var target: String
    /// nil when the upstream request carries no body.
    public var body: [UInt8]?
    /// The encoder's Content-Type; nil exactly when `body` is nil.
    public var contentType: String?
    /// SOAP 1.1's `SOAPAction` (sent quoted).
    public var soapAction: String?
}
