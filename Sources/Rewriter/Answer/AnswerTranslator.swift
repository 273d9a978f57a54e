/// What an upstream's answer becomes under a route's `response:` rule,
/// computed from the answer alone (no I/O): the decoded document the
/// validators judge, and what the client gets.
public enum AnswerTranslator {
    public enum Outcome: Sendable, Equatable {
        /// `document`: the decoded answer, whole, as JSON (the validators read
        /// it); `body`: the client's JSON.
        case translated(document: [UInt8], body: [UInt8])
        /// A configured body-level error: the client gets `problem` (the
        /// validators still judge `document`).
        case error(document: [UInt8], problem: Problem)
        /// The answer cannot become the client's: a 502 whose `logDetail` says why.
        case untranslatable(Problem)
    }

    /// An answer with no body (a 204, a 304, a HEAD's) is not translated: nil.
    /// `writesDocument`: something reads the decoded document (a validator
    /// of the body); else it is not written, and `document` is empty.
    public static func translate(_ rule: AnswerRule, contentType: String?, body: [UInt8], maxDepth: Int = JSONReader.defaultMaxDepth,
                                 route: String? = nil, writesDocument: Bool = true) -> Outcome? {
        guard rule.decode != .none, !body.isEmpty else { return nil }
        let document: JSONValue
        do throws(Failure) {
            document = try decode(rule, contentType: contentType, body: body, maxDepth: maxDepth)
        } catch {
            return .untranslatable(problem("the upstream's answer could not be decoded", log: error.reason, route: route))
        }
        let written = writesDocument ? JSONWriter.bytes(document) : []
        for error in rule.errors where error.when.resolve(in: document) != nil {
            var problem = Problem(status: error.status, code: "upstream-error", title: "The upstream reported an error",
                                  detail: error.detail.flatMap { $0.resolve(in: document) }.map(text) ?? "", route: route)
            problem.logDetail = "response.errors: \(error.when) is in the answer"
            return .error(document: written, problem: problem)
        }
        var picked = document
        if let pick = rule.pick {
            guard let part = pick.resolve(in: document) else {
                return .untranslatable(problem("the upstream's answer lacks an expected part", log: "response.pick: \(pick) is not in the answer",
                                               route: route))
            }
            picked = part
        }
        guard let fields = rule.fields else { return .translated(document: written, body: JSONWriter.bytes(picked)) }
        var object = JSONObject(reservingCapacity: fields.count)
        for field in fields {
            switch value(of: field, in: picked) {
            case .success(let value?): object.append(field.name, value)
            case .success(nil): continue
            case .failure(let reason):
                return .untranslatable(problem("the upstream's answer lacks an expected field", log: "response.fields.\(field.name): \(reason)",
                                               route: route))
            }
        }
        return .translated(document: written, body: JSONWriter.bytes(.object(object)))
    }

    struct Failure: Error {
        let reason: String
    }

    /// The document by the rule's `decode`, or by the Content-Type for `auto`.
    static func decode(_ rule: AnswerRule, contentType: String?, body: [UInt8], maxDepth: Int) throws(Failure) -> JSONValue {
        var decode = rule.decode
        if decode == .auto {
            guard let kind = kind(of: contentType) else {
                throw Failure(reason: "response.decode auto: no decoder for Content-Type \(contentType.map { "'\($0)'" } ?? "(none)")")
            }
            decode = kind
        }
        switch decode {
        case .json:
            do throws(JSONError) { return try JSONReader.parse(body, maxDepth: maxDepth) } catch { throw Failure(reason: "JSON: \(error)") }
        case .xml:
            do throws(XMLDecoder.Failure) {
                return try XMLDecoder.decode(body, namespaces: rule.namespaces, arrays: rule.arrayPaths, maxDepth: maxDepth)
            } catch {
                throw Failure(reason: "XML: \(error)")
            }
        case .form:
            do throws(RewriteError) { return .object(try QueryDecoder.decode(body)) } catch { throw Failure(reason: "form: \(error)") }
        case .auto, .none:
            throw Failure(reason: "no decoder")
        }
    }

    /// The decoder a media type calls for: JSON (`application/json`, `+json`),
    /// XML (`text/xml`, `application/xml`, `+xml`, SOAP 1.2's), or a form.
    static func kind(of contentType: String?) -> AnswerRule.Decode? {
        guard var contentType else { return nil }
        // Read as bytes, compared as ASCII without case, in place: characters
        // (grapheme by grapheme) and a lowercased copy were a twentieth of a translation.
        return contentType.withUTF8 { bytes in
            func blank(_ b: UInt8) -> Bool { b == UInt8(ascii: " ") || b == UInt8(ascii: "\t") }
            var start = 0, end = bytes.firstIndex(of: UInt8(ascii: ";")) ?? bytes.count
            while start < end, blank(bytes[start]) { start += 1 }
            while end > start, blank(bytes[end - 1]) { end -= 1 }
            let media = bytes[start..<end]
            func equal(_ part: Slice<UnsafeBufferPointer<UInt8>>, _ name: StaticString) -> Bool {
                part.elementsEqual(UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount), by: HeaderList.sameLetter)
            }
            func `is`(_ name: StaticString) -> Bool { equal(media, name) }
            func ends(_ suffix: StaticString) -> Bool {
                media.count >= suffix.utf8CodeUnitCount && equal(media.suffix(suffix.utf8CodeUnitCount), suffix)
            }
            if `is`("application/json") || ends("+json") { return .json }
            if `is`("text/xml") || `is`("application/xml") || ends("+xml") { return .xml }
            if `is`("application/x-www-form-urlencoded") { return .form }
            return nil
        }
    }

    /// A field's value: read, defaulted, listed and typed; nil when it is absent and optional.
    static func value(of field: AnswerField, in part: JSONValue) -> Result<JSONValue?, Failure> {
        var value = field.from.resolve(in: part)
        if value == nil || value == .null {
            if field.required { return .failure(Failure(reason: "\(field.from) is missing")) }
            guard let fallback = field.defaultValue else { return .success(field.array ? .array([]) : nil) }
            value = fallback
        }
        guard var value else { return .success(nil) }
        if field.array, case .array = value {} else if field.array { value = .array([value]) }
        guard let type = field.type else { return .success(value) }
        guard let converted = type.convert(value) else {
            return .failure(Failure(reason: "\(field.from) is not \(type.expectation)"))
        }
        return .success(converted)
    }

    /// A detail read from the answer: a string as it is, anything else as JSON.
    private static func text(_ value: JSONValue) -> String {
        if case .string(let string) = value { return string }
        return JSONWriter.string(value)
    }

    private static func problem(_ detail: String, log: String, route: String?) -> Problem {
        var problem = Problem(status: 502, code: "bad-upstream-answer", title: "Bad upstream answer", detail: detail, route: route)
        problem.logDetail = log
        return problem
    }
}
