import Rewriter
import Yams

extension ConfigReader {
    /// `rewrite`: its translation rule (nil when it only replaces a prefix,
    /// so the route stays a pass-through) and its `prefix`.
    func readRewrite(_ node: Node, _ path: String) -> (rule: Rule?, prefix: String?) {
        guard let fields = mapping(node, path, known: ["prefix", "method", "path", "from", "encoding", "query", "params", "actual", "max_json_depth", "xml"])
        else { return (nil, nil) }
        var prefix: String?
        if let n = fields.take("prefix"), let text = string(n, fields.path("prefix")) {
            if !text.hasPrefix("/") || text.split(separator: "/").contains(where: { PathSegment.dots($0.utf8) > 0 }) || text.contains("?") || text.contains("#") {
                report(n, fields.path("prefix"), "expected a path starting with '/' without '.' or '..' segments, '?' or '#', found '\(text)'")
            } else {
                prefix = text
            }
            if fields.has("path") { report(n, fields.path("prefix"), "give either prefix or path, not both") }
            if fields.keys.count == 1 {
                fields.finish()
                return (nil, prefix)
            }
        }
        return (readRule(fields, path), prefix)
    }

    private func readRule(_ fields: Fields, _ path: String) -> Rule? {
        defer { fields.finish() }
        var rule = Rule()
        if let n = fields.take("method"), let method = string(n, fields.path("method")) {
            if HeaderList.isValidName(method) && method == method.uppercased() {
                rule.method = method
            } else {
                report(n, fields.path("method"), "'\(method)' is not an upper-case method name")
            }
        }
        if let n = fields.take("path"), let text = string(n, fields.path("path")) { rule.path = readTemplate(text, n, fields.path("path")) }
        if let n = fields.take("from"), let v = oneOf(n, fields.path("from"), Rule.Source.self) { rule.from = v }
        if let n = fields.take("encoding"), let v = oneOf(n, fields.path("encoding"), Rule.Encoding.self) { rule.encoding = v }
        if let n = fields.take("query") { rule.query = readQueryOptions(n, fields.path("query")) }
        if let n = fields.take("params") { rule.params = readParams(n, fields.path("params")) }
        if let n = fields.take("actual"), let actual = mapping(n, fields.path("actual"), known: ["query", "body"]) {
            defer { actual.finish() }
            if let q = actual.take("query"), let value = json(q, actual.path("query")) {
                if case .object(let object) = value { rule.actualQuery = object } else { report(q, actual.path("query"), "expected a mapping") }
            }
            if let b = actual.take("body") { rule.actualBody = json(b, actual.path("body")) }
        }
        if let n = fields.take("max_json_depth"), let v = int(n, fields.path("max_json_depth"), in: 1...1000) { rule.maxJSONDepth = v }
        if let n = fields.take("xml") {
            rule.xml = readXMLBody(n, fields.path("xml"))
            if rule.encoding != .xml { report(n, fields.path("xml"), "applies to encoding: xml, which the rule has not") }
        } else if rule.encoding == .xml {
            report(fields.take("encoding"), fields.path("xml"), "missing: encoding xml needs xml: {root: ...}")
        }

        for param in rule.params where param.type == .file && rule.encoding != .multipart {
            report(fields.take("params"), fields.path("params.\(param.name)"), "type: file needs encoding: multipart")
        }
        if let body = rule.actualBody, rule.encoding == .form || rule.encoding == .multipart {
            if case .object = body {} else {
                report(fields.take("actual"), fields.path("actual.body"), "a \(rule.encoding.rawValue) body must be a mapping")
            }
        }
        return rule
    }

    private func readTemplate(_ text: String, _ node: Node, _ path: String) -> URITemplate? {
        do {
            let template = try URITemplate(text)
            if template.hasFragment {
                report(node, path, "a fragment ({#...}) is never sent upstream; remove it")
                return nil
            }
            if !(text.hasPrefix("/") || text.hasPrefix("{/") || text.hasPrefix("{+")) {
                report(node, path, "must start with '/' (or a {/...} or {+...} expression)")
                return nil
            }
            return template
        } catch {
            report(node, path, "invalid URI template: \(error)")
            return nil
        }
    }

    private func readQueryOptions(_ node: Node, _ path: String) -> QueryOptions {
        var options = QueryOptions()
        guard let fields = mapping(node, path, known: ["arrays", "booleans", "nested", "nulls", "spaces", "order"]) else { return options }
        defer { fields.finish() }
        if let n = fields.take("arrays"), let v = oneOf(n, fields.path("arrays"), QueryOptions.Arrays.self) { options.arrays = v }
        if let n = fields.take("booleans"), let v = oneOf(n, fields.path("booleans"), QueryOptions.Booleans.self) { options.booleans = v }
        if let n = fields.take("nested"), let v = oneOf(n, fields.path("nested"), QueryOptions.Nested.self) { options.nested = v }
        if let n = fields.take("nulls"), let v = oneOf(n, fields.path("nulls"), QueryOptions.Nulls.self) { options.nulls = v }
        if let n = fields.take("spaces"), let v = oneOf(n, fields.path("spaces"), QueryOptions.Spaces.self) { options.spaces = v }
        if let n = fields.take("order"), let v = oneOf(n, fields.path("order"), QueryOptions.Order.self) { options.order = v }
        return options
    }

    private func readParams(_ node: Node, _ path: String) -> [ParamRule] {
        guard let fields = mapping(node, path, known: nil) else { return [] }
        var rules: [ParamRule] = []
        for entry in fields.entries {
            let p = fields.path(entry.key)
            guard let spec = mapping(entry.value, p, known: ["from", "type", "default", "value", "required"]) else { continue }
            defer { spec.finish() }
            var rule = ParamRule(name: entry.key)
            if let n = spec.take("from") { rule.from = string(n, spec.path("from")) }
            if let n = spec.take("type") { rule.type = oneOf(n, spec.path("type"), ParamType.self) }
            if let n = spec.take("required") { rule.required = bool(n, spec.path("required")) ?? false }
            for key in ["default", "value"] {
                guard let n = spec.take(key), let raw = json(n, spec.path(key)) else { continue }
                var value = raw
                if let type = rule.type {
                    guard let converted = type.convert(raw) else {
                        report(n, spec.path(key), "does not convert to type \(type.rawValue)")
                        continue
                    }
                    value = converted
                }
                if key == "default" { rule.defaultValue = value } else { rule.value = value }
            }
            if rule.value != nil && (spec.has("from") || spec.has("default") || spec.has("required")) {
                report(entry.value, p, "a constant (value) takes no from, default or required")
            }
            if rule.required && rule.defaultValue != nil {
                report(entry.value, p, "required and default contradict each other")
            }
            rules.append(rule)
        }
        return rules
    }

    /// `rewrite.xml`: the request body's root element, its namespace and SOAP envelope.
    private func readXMLBody(_ node: Node, _ path: String) -> XMLEncoder? {
        guard let fields = mapping(node, path, known: ["root", "namespace", "children", "namespaces", "envelope", "action"]) else { return nil }
        defer { fields.finish() }
        guard let n = fields.take("root"), let root = string(n, fields.path("root")) else {
            if !fields.has("root") { report(node, fields.path("root"), "missing: the root element's name") }
            return nil
        }
        guard XMLEncoder.isName(root), !root.contains(":") else {
            report(n, fields.path("root"), "'\(root)' is not an XML element name (without a prefix)")
            return nil
        }
        var encoder = XMLEncoder(root: root)
        if let n = fields.take("namespace") { encoder.namespace = string(n, fields.path("namespace")) }
        if let n = fields.take("children"), let v = oneOf(n, fields.path("children"), XMLEncoder.Children.self) { encoder.children = v }
        if let n = fields.take("envelope"), let v = oneOf(n, fields.path("envelope"), XMLEncoder.Envelope.self) { encoder.envelope = v }
        if let n = fields.take("action"), let action = string(n, fields.path("action")) {
            if action.unicodeScalars.contains(where: { $0.value < 0x20 || $0 == "\"" || $0.value == 0x7F }) {
                report(n, fields.path("action"), "an action is a URI: no quotes or control characters")
            } else {
                encoder.action = action
            }
        }
        if let n = fields.take("namespaces"), let entries = mapping(n, fields.path("namespaces"), known: nil) {
            for entry in entries.entries {
                guard XMLEncoder.isName(entry.key), !entry.key.contains(":"), entry.key != "tns", entry.key != "soap" else {
                    report(entry.value, entries.path(entry.key), "'\(entry.key)' is not a prefix this body can declare (tns and soap are the gateway's)")
                    continue
                }
                if let uri = string(entry.value, entries.path(entry.key)) { encoder.namespaces.append((entry.key, uri)) }
            }
        }
        if encoder.children == .unqualified, encoder.namespace == nil {
            report(node, fields.path("children"), "unqualified children need the root's namespace")
        }
        return encoder
    }
}
