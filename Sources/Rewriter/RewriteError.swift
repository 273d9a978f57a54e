/// A client's convenience parameters could not be translated (400, or 415
/// for a body that cannot carry parameters).
public struct RewriteError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: Sendable, Hashable {
        public let name: String
        public let title: String
        public let status: Int
        public static let invalidJSON = Code(name: "invalid-json", title: "Request body is not valid JSON", status: 400)
        public static let notAnObject = Code(name: "not-an-object", title: "Request body is not a JSON object", status: 400)
        public static let invalidQuery = Code(name: "invalid-query", title: "Query string or form body is invalid", status: 400)
        public static let unsupportedBody = Code(
            name: "unsupported-body", title: "Request body cannot carry parameters", status: 415)
        public static let missingParameter = Code(name: "missing-parameter", title: "A required parameter is missing", status: 400)
        public static let invalidParameter = Code(
            name: "invalid-parameter", title: "A parameter has the wrong type or form", status: 400)
    }

    public var code: Code
    public var key: String?
    public var detail: String

    public init(_ code: Code, key: String? = nil, detail: String) {
        self.code = code
        self.key = key
        self.detail = detail
    }

    public var description: String { detail }

    public func problem(route: String?) -> Problem {
        Problem(status: code.status, code: code.name, title: code.title, detail: detail, route: route)
    }
}
