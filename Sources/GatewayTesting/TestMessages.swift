/// A request as an in-process upstream receives it, or as a test sends it.
public struct TestRequest: Sendable {
    /// `GET`, `POST`, …
    public var method: String
    /// The path and query.
    public var target: String
    /// The fields in the order they came, names as written.
    public var headers: [(name: String, value: String)]
    /// The whole body (empty for none).
    public var body: [UInt8]

    /// A request; `headers` and `body` empty unless given.
    public init(method: String = "GET", target: String, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.method = method
        self.target = target
        self.headers = headers
        self.body = body
    }

    /// The first value of the field `name` (compared without case).
    public subscript(_ name: String) -> String? { firstValue(of: name, in: headers) }
}

/// An answer: what an in-process upstream gives, or what the test's client got.
public struct TestResponse: Sendable {
    /// The status code.
    public var status: Int
    /// The fields in the order they came.
    public var headers: [(name: String, value: String)]
    /// The whole body.
    public var body: [UInt8]

    /// An answer; no fields and no body unless given.
    public init(status: Int = 200, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// An answer whose body is `text` in UTF-8.
    public init(status: Int = 200, headers: [(name: String, value: String)] = [], text: String) {
        self.init(status: status, headers: headers, body: Array(text.utf8))
    }

    /// The body read as UTF-8.
    public var text: String { String(decoding: body, as: UTF8.self) }

    /// The first value of the field `name` (compared without case).
    public subscript(_ name: String) -> String? { firstValue(of: name, in: headers) }
}

private func firstValue(of name: String, in headers: [(name: String, value: String)]) -> String? {
    headers.first { $0.name.lowercased() == name.lowercased() }?.value
}
