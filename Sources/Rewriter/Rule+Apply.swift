extension Rule {
    /// Translates one request. `boundary` is asked only for multipart bodies.
    public func apply(
        to request: IncomingRequest, boundary: () -> String = MultipartEncoder.randomBoundary
    ) throws(RewriteError) -> RewrittenRequest {
        var params = try params.apply(to: try convenienceParameters(of: request))
        let method = self.method ?? request.method

        var target: [UInt8]
        if let path {
            if let name = path.prefixedComposite(lookup: { params[$0] }) {
                throw RewriteError(.invalidParameter, key: name,
                                   detail: "parameter '\(name)' is a list or object, which the prefix modifier in \(path.source) cannot shorten")
            }
            let query = query
            let expanded = try path.expandTarget(lookup: { params[$0] }, text: { query.text(of: $0) })
            for name in path.variableNames { params.removeValue(forKey: name) }
            target = expanded.first == UInt8(ascii: "/") ? expanded : [UInt8(ascii: "/")] + expanded
        } else {
            // Room for the query parameters as escaped too: one allocation.
            target = []
            target.reserveCapacity(request.path.utf8.count + 2 * (request.body.count + (request.query?.utf8.count ?? 0)) + 64)
            target.append(contentsOf: request.path.utf8)
        }

        let placement = placement(for: method)
        let queryObject = actualQuery ?? (placement == .query ? params : nil)
        if let queryObject, !queryObject.isEmpty {
            let hasQuery = target.contains(UInt8(ascii: "?"))
            // Room for the parameters as escaped: one allocation, not a doubling series.
            target.reserveCapacity(target.count + 2 * (request.body.count + (request.query?.utf8.count ?? 0)) + 64)
            target.append(hasQuery ? UInt8(ascii: "&") : UInt8(ascii: "?"))
            let encoder = QueryEncoder(options: query, spaceAsPlus: query.spaces == .plus)
            let before = target.count
            encoder.encode(queryObject, into: &target)
            if target.count == before { target.removeLast() }  // every value was omitted
        }

        var result = RewrittenRequest(method: method, target: String(decoding: target, as: UTF8.self), body: nil, contentType: nil)
        if let actualBody {
            try encodeBody(actualBody, as: placement == .query ? .json : placement, into: &result, boundary: boundary)
        } else if placement != .query {
            try encodeBody(.object(params), as: placement, into: &result, boundary: boundary)
        }
        return result
    }

    private func encodeBody(_ value: JSONValue, as encoding: Encoding, into result: inout RewrittenRequest, boundary: () -> String)
        throws(RewriteError) {
        switch (encoding, value) {
        case (.xml, .object(let object)):
            let encoder = xml ?? XMLEncoder(root: "request")
            result.body = try encoder.encode(object)
            result.contentType = encoder.contentType
            if encoder.envelope == .soap11 { result.soapAction = encoder.action ?? "" }
        case (.form, .object(let object)):
            let spaceAsPlus = (query.spaces ?? .plus) == .plus
            result.body = QueryEncoder(options: query, spaceAsPlus: spaceAsPlus).encode(object)
            result.contentType = "application/x-www-form-urlencoded"
        case (.multipart, .object(let object)):
            let encoder = MultipartEncoder(boundary: boundary(), options: query)
            let files = Set(params.lazy.filter { $0.type == .file }.map(\.name))
            result.body = encoder.encode(object, fileKeys: files)
            result.contentType = encoder.contentType
        default:
            result.body = JSONWriter.bytes(value)
            result.contentType = "application/json"
        }
    }

    /// `from`: a JSON or form body, or the query string; then path captures
    /// overwrite (in place) or join the parameters.
    func convenienceParameters(of request: IncomingRequest) throws(RewriteError) -> JSONObject {
        var object: JSONObject
        let media = request.contentType.map(MediaType.init)
        switch from {
        case .query:
            object = try QueryDecoder.decode(Array((request.query ?? "").utf8))
        case .body, .auto:
            if request.body.isEmpty {
                object = from == .auto ? try QueryDecoder.decode(Array((request.query ?? "").utf8)) : JSONObject()
            } else if media?.isJSON == true {
                let value: JSONValue
                do {
                    value = try JSONReader.parse(request.body, maxDepth: maxJSONDepth)
                } catch {
                    throw RewriteError(.invalidJSON, detail: "the request body is not valid JSON: \(error)")
                }
                guard case .object(let parameters) = value else {
                    throw RewriteError(.notAnObject, detail: "the request body is a JSON \(value.typeName), not an object: parameters are read from a JSON object")
                }
                object = parameters
            } else if media?.isForm == true {
                object = try QueryDecoder.decode(request.body)
            } else {
                let type = request.contentType ?? "none"
                throw RewriteError(
                    .unsupportedBody,
                    detail: "parameters are read from a JSON or form body; this body's Content-Type is \(type)")
            }
        }
        for capture in request.captures { object[capture.name] = .string(capture.value) }
        return object
    }
}

/// Just enough media type parsing to tell JSON and form bodies apart.
struct MediaType {
    let essence: Substring

    init(_ header: String) {
        // On UTF-8 code units: Character-wise scanning (grapheme breaking) showed in profiles.
        let utf8 = header.utf8
        let isSpace = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        let end = utf8.firstIndex(of: UInt8(ascii: ";")) ?? utf8.endIndex
        var lower = utf8.startIndex, upper = end
        while lower < upper, isSpace(utf8[lower]) { lower = utf8.index(after: lower) }
        while upper > lower, isSpace(utf8[utf8.index(before: upper)]) { upper = utf8.index(before: upper) }
        essence = header[lower..<upper]
    }

    var isJSON: Bool {
        Self.equal(essence, "application/json")
            || (Self.equal(essence.prefix(12), "application/") && Self.equal(essence.suffix(5), "+json"))
    }

    var isForm: Bool { Self.equal(essence, "application/x-www-form-urlencoded") }

    /// ASCII case-insensitive, without building a lowercased copy per request.
    private static func equal(_ text: Substring, _ lower: StaticString) -> Bool {
        let expected = UnsafeBufferPointer(start: lower.utf8Start, count: lower.utf8CodeUnitCount)
        return text.utf8.count == expected.count
            && zip(text.utf8, expected).allSatisfy { a, b in a == b || (a >= 0x41 && a <= 0x5A && a | 0x20 == b) }
    }
}
