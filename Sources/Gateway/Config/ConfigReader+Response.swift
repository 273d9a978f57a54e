import Rewriter
import Yams

extension ConfigReader {
    /// `response`: how the upstream's answer becomes the client's JSON (docs/translation.md, the answer side).
    func readResponse(_ node: Node, _ path: String) -> AnswerRule? {
        guard let fields = mapping(node, path, known: ["decode", "xml", "pick", "fields", "errors"]) else { return nil }
        defer { fields.finish() }
        var rule = AnswerRule()
        if let n = fields.take("decode"), let v = oneOf(n, fields.path("decode"), AnswerRule.Decode.self) { rule.decode = v }
        if let n = fields.take("xml"), let xml = mapping(n, fields.path("xml"), known: ["namespaces", "arrays"]) {
            defer { xml.finish() }
            if let v = xml.take("namespaces"), let mode = oneOf(v, xml.path("namespaces"), XMLDecoder.Namespaces.self) { rule.namespaces = mode }
            if let v = xml.take("arrays"), let items = sequence(v, xml.path("arrays")) {
                for (index, item) in items.enumerated() {
                    guard let text = string(item, xml.path("arrays") + "[\(index)]") else { continue }
                    guard text.hasPrefix("/"), !text.hasSuffix("/"), !text.contains("//") else {
                        report(item, xml.path("arrays") + "[\(index)]", "expected an element path from the root such as /Envelope/Body/User/Tag, found '\(text)'")
                        continue
                    }
                    rule.arrays.insert(text)
                }
            }
        }
        if let n = fields.take("pick") { rule.pick = pointer(n, fields.path("pick")) }
        if let n = fields.take("fields"), let entries = mapping(n, fields.path("fields"), known: nil) {
            rule.fields = entries.entries.compactMap { readAnswerField($0.key, $0.value, entries.path($0.key)) }
        }
        if let n = fields.take("errors"), let items = sequence(n, fields.path("errors")) {
            rule.errors = items.enumerated().compactMap { readAnswerError($1, fields.path("errors") + "[\($0)]") }
        }
        if rule.decode == .none, rule.pick != nil || rule.fields != nil || !rule.errors.isEmpty {
            report(node, fields.path("decode"), "none passes the answer through: pick, fields and errors need a decoded answer")
        }
        return rule
    }

    private func readAnswerField(_ name: String, _ node: Node, _ path: String) -> AnswerField? {
        guard let spec = mapping(node, path, known: ["from", "type", "required", "array", "default"]) else { return nil }
        defer { spec.finish() }
        guard let n = spec.take("from"), let from = pointer(n, spec.path("from")) else {
            if !spec.has("from") { report(node, spec.path("from"), "missing: where in the answer the field is read (a JSON pointer)") }
            return nil
        }
        var field = AnswerField(name: name, from: from)
        if let n = spec.take("type") { field.type = oneOf(n, spec.path("type"), ParamType.self) }
        if field.type == .file { report(spec.take("type"), spec.path("type"), "file is a request-side type") }
        if let n = spec.take("required") { field.required = bool(n, spec.path("required")) ?? false }
        if let n = spec.take("array") { field.array = bool(n, spec.path("array")) ?? false }
        if let n = spec.take("default"), let raw = json(n, spec.path("default")) {
            if let type = field.type, type.convert(raw) == nil {
                report(n, spec.path("default"), "does not convert to type \(type.rawValue)")
            } else {
                field.defaultValue = raw
            }
        }
        if field.required, field.defaultValue != nil { report(node, path, "required and default contradict each other") }
        return field
    }

    private func readAnswerError(_ node: Node, _ path: String) -> AnswerError? {
        guard let spec = mapping(node, path, known: ["when", "status", "detail"]) else { return nil }
        defer { spec.finish() }
        guard let n = spec.take("when"), let when = pointer(n, spec.path("when")) else {
            if !spec.has("when") { report(node, spec.path("when"), "missing: the JSON pointer whose presence is the error") }
            return nil
        }
        var error = AnswerError(when: when, status: 502)
        if let n = spec.take("status"), let status = int(n, spec.path("status"), in: 400...599) { error.status = status }
        if let n = spec.take("detail") { error.detail = pointer(n, spec.path("detail")) }
        return error
    }

    private func pointer(_ node: Node, _ path: String) -> JSONPointer? {
        guard let text = string(node, path) else { return nil }
        guard let pointer = JSONPointer(text) else {
            report(node, path, "expected a JSON pointer such as /Envelope/Body/User, found '\(text)'")
            return nil
        }
        return pointer
    }
}
