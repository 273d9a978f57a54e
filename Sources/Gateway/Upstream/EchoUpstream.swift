import Rewriter

/// The built-in `echo` upstream: answers with a JSON description of the
/// request it received, so the default config works with no service behind it.
enum EchoUpstream {
    static func response(to request: UpstreamRequest) -> [UInt8] {
        var object = JSONObject()
        object.append("method", .string(request.method))
        let q = request.target.firstIndex(of: "?")
        object.append("path", .string(String(request.target[..<(q ?? request.target.endIndex)])))
        object.append("query", q.map { .string(String(request.target[request.target.index(after: $0)...])) } ?? .null)
        var headers = request.headers.map { JSONValue.array([.string($0.name), .string($0.value)]) }
        // As an HTTP/1.1 upstream would receive it.
        if case .length(let length) = request.framing { headers.append(.array(["Content-Length", .string(String(length))])) }
        object.append("headers", .array(headers))
        if let body = request.body {
            // Bodies that are not UTF-8 (multipart files) are shown with invalid bytes replaced.
            object.append("body", .string(String(decoding: body, as: UTF8.self)))
        } else {
            object.append("body", .null)
        }
        var out = JSONWriter.bytes(.object(object))
        out.append(UInt8(ascii: "\n"))
        return out
    }
}
