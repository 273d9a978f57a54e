// libFuzzer entry: an upstream's answer through the answer side — XML by
// libxml2's pull parser (both namespace modes, forced arrays) and the form
// and JSON decoders, then pick, fields and errors. Translated or refused,
// never a trap; the bytes for the client always parse as JSON. The same
// bytes as a gzip or deflate answer: inflated within the limit, or refused.
@testable import Gateway
import Rewriter

let rule = AnswerRule(arrays: ["/r/a"], pick: JSONPointer("/r"), fields: [
    AnswerField(name: "a", from: JSONPointer("/a")!, array: true),
    AnswerField(name: "n", from: JSONPointer("/@n")!, type: .int),
    AnswerField(name: "t", from: JSONPointer("/#text")!, type: .timestampMs, defaultValue: .number("0")),
], errors: [AnswerError(when: JSONPointer("/Fault")!, status: 404, detail: JSONPointer("/Fault/faultstring"))])

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: start, count: count))
    for coding in ["gzip", "deflate"] {
        if case .success(let inflated)? = ContentCoding.decode(bytes, coding: coding, limit: 1 << 16) {
            precondition(inflated.count <= 1 << 16, "inflated past the limit")
        }
    }
    for namespaces in XMLDecoder.Namespaces.allCases {
        if let document = try? XMLDecoder.decode(bytes, namespaces: namespaces, arrays: ["/r/a"], maxDepth: 16) {
            precondition((try? JSONReader.parse(JSONWriter.bytes(document))) == document, "a decoded document does not read back")
        }
    }
    for type in ["text/xml", "application/json", "application/x-www-form-urlencoded"] {
        switch AnswerTranslator.translate(rule, contentType: type, body: bytes, maxDepth: 16) {
        case .translated(let document, let body)?:
            precondition((try? JSONReader.parse(document)) != nil && (try? JSONReader.parse(body)) != nil, "translated bytes are not JSON")
        case .error(_, let problem)?:
            precondition(problem.status == 404, "an errors entry answers its status")
        case .untranslatable(let problem)?:
            precondition(problem.status == 502 && problem.logDetail != nil, "a failure is a 502 with its reason logged")
        case nil:
            precondition(bytes.isEmpty, "only an empty answer is left as it came")
        }
    }
    return 0
}
