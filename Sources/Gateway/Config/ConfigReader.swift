import Foundation
import Rewriter
import Yams

/// Walks a composed YAML tree, reading typed values and collecting every
/// problem with its line and key path instead of stopping at the first.
final class ConfigReader {
    let file: String
    let baseDirectory: String
    let environment: [String: String]
    private(set) var issues: [ConfigIssue] = []
    /// What loads but is probably not what was meant: `check` prints these.
    private(set) var warnings: [ConfigIssue] = []
    /// Values that came from `${env:...}` or `${file:...}`: never shown.
    private(set) var secrets: [String] = []
    /// Every upstream name the file declares, valid or not, so a route naming
    /// a broken one does not add a misleading "unknown upstream".
    var declaredUpstreams: [String] = []
    var routeNames: Set<String> = []

    init(file: String, environment: [String: String]) {
        self.file = file
        self.baseDirectory = (file as NSString).deletingLastPathComponent
        self.environment = environment
    }

    /// A value written in the file that must never be shown (a password).
    func keepSecret(_ value: String) { secrets.append(value) }

    func report(_ node: Node?, _ path: String, _ message: String) {
        issues.append(ConfigIssue(file: file, line: node?.mark?.line, column: node?.mark?.column, path: path, message: message))
    }

    func warn(_ node: Node?, _ path: String, _ message: String) {
        warnings.append(ConfigIssue(file: file, line: node?.mark?.line, column: node?.mark?.column, path: path, message: message))
    }

    // MARK: Structure

    /// `known`: the keys this mapping may hold; nil when any key is a name
    /// (upstreams, params, headers).
    func mapping(_ node: Node, _ path: String, known: [String]?) -> Fields? {
        guard case .mapping(let mapping) = node else {
            report(node, path, "expected a mapping, found \(describe(node))")
            return nil
        }
        return Fields(node: node, mapping: mapping, path: path, known: known, reader: self)
    }

    func sequence(_ node: Node, _ path: String) -> [Node]? {
        guard case .sequence(let sequence) = node else {
            report(node, path, "expected a list, found \(describe(node))")
            return nil
        }
        return Array(sequence)
    }

    // MARK: Scalars

    /// A string value, with `${env:NAME}` / `${file:PATH}` interpolated.
    func string(_ node: Node, _ path: String) -> String? {
        guard case .scalar(let scalar) = node, node.tagName != .null else {
            report(node, path, "expected a string, found \(describe(node))")
            return nil
        }
        return interpolate(scalar.string, node, path)
    }

    func int(_ node: Node, _ path: String, in range: ClosedRange<Int>) -> Int? {
        guard node.tagName == .int, let value = node.int else {
            report(node, path, "expected an integer, found \(describe(node))")
            return nil
        }
        guard range.contains(value) else {
            report(node, path, "must be between \(range.lowerBound) and \(range.upperBound), found \(value)")
            return nil
        }
        return value
    }

    func bool(_ node: Node, _ path: String) -> Bool? {
        guard node.tagName == .bool, let value = node.bool else {
            report(node, path, "expected true or false, found \(describe(node))")
            return nil
        }
        return value
    }

    func duration(_ node: Node, _ path: String) -> Duration? {
        guard case .scalar(let scalar) = node, let value = DurationParser.parse(scalar.string) else {
            report(node, path, "expected a duration such as 250ms, 2s, 1m or 1h30m (at most 8760h), found \(describe(node))")
            return nil
        }
        return value
    }

    /// A duration that must be at least `smallest`: `effect` says what a
    /// smaller one would do (0s is no timeout here: it fails every call).
    func duration(_ node: Node, _ path: String, atLeast smallest: Duration, effect: String) -> Duration? {
        guard let value = duration(node, path) else { return nil }
        guard value >= smallest else {
            report(node, path, "must be at least \(DurationParser.format(smallest)): \(DurationParser.format(value)) \(effect)")
            return nil
        }
        return value
    }

    func oneOf<E: RawRepresentable & CaseIterable>(_ node: Node, _ path: String, _: E.Type = E.self) -> E? where E.RawValue == String {
        guard case .scalar(let scalar) = node, let value = E(rawValue: scalar.string) else {
            let choices = E.allCases.map(\.rawValue).joined(separator: " | ")
            report(node, path, "expected one of \(choices), found \(describe(node))")
            return nil
        }
        return value
    }

    func strings(_ node: Node, _ path: String) -> [String]? {
        guard let items = sequence(node, path) else { return nil }
        let values = items.enumerated().map { string($1, "\(path)[\($0)]") }
        return values.contains(nil) ? nil : values.map { $0! }
    }

    /// Any YAML value as JSON: mappings keep their order, numbers their spelling.
    func json(_ node: Node, _ path: String) -> JSONValue? {
        switch node {
        case .mapping(let mapping):
            var object = JSONObject()
            for (key, value) in mapping {
                guard let name = key.scalar?.string else {
                    report(key, path, "keys must be strings")
                    return nil
                }
                guard let converted = json(value, "\(path).\(name)") else { return nil }
                object.append(name, converted)
            }
            return .object(object)
        case .sequence(let sequence):
            var array: [JSONValue] = []
            for (i, element) in sequence.enumerated() {
                guard let converted = json(element, "\(path)[\(i)]") else { return nil }
                array.append(converted)
            }
            return .array(array)
        case .scalar(let scalar):
            switch node.tagName {
            case .null: return .null
            case .bool: return node.bool.map(JSONValue.bool)
            case .int:
                guard let value = node.int else {
                    report(node, path, "integer out of range")
                    return nil
                }
                return .number(String(value))
            case .float:
                if case .number(let spelling)? = try? JSONReader.parse(scalar.string) { return .number(spelling) }
                guard let value = node.float, value.isFinite else {
                    report(node, path, "JSON has no infinity or NaN")
                    return nil
                }
                return .number("\(value)")
            default:
                return interpolate(scalar.string, node, path).map(JSONValue.string)
            }
        case .alias:
            report(node, path, "YAML aliases are not supported")
            return nil
        }
    }

    func describe(_ node: Node) -> String {
        switch node {
        case .mapping: "a mapping"
        case .sequence: "a list"
        case .alias: "an alias"
        case .scalar(let scalar):
            node.tagName == .null ? "nothing" : "'\(scalar.string.prefix(40))'"
        }
    }

    // MARK: Interpolation

    /// `${env:NAME}`, `${env:NAME:-default}` (as shells and Docker Compose
    /// write it: the default when NAME is unset or empty) and `${file:PATH}`
    /// (relative to the config's folder, one trailing newline dropped);
    /// `$${` writes a literal `${`.
    func interpolate(_ text: String, _ node: Node, _ path: String) -> String? {
        guard text.contains("${") else { return text }
        var result = ""
        var rest = Substring(text)
        while let start = rest.range(of: "${") {
            if start.lowerBound > rest.startIndex, rest[rest.index(before: start.lowerBound)] == "$" {
                result += rest[..<rest.index(before: start.lowerBound)] + "${"
                rest = rest[start.upperBound...]
                continue
            }
            result += rest[..<start.lowerBound]
            guard let end = rest[start.upperBound...].firstIndex(of: "}") else {
                report(node, path, "unterminated '${' (write '$${' for a literal)")
                return nil
            }
            let reference = rest[start.upperBound..<end]
            rest = rest[rest.index(after: end)...]
            guard let value = resolve(reference, node, path) else { return nil }
            secrets.append(value)
            result += value
        }
        return result + rest
    }

    private func resolve(_ reference: Substring, _ node: Node, _ path: String) -> String? {
        if reference.hasPrefix("env:") {
            let spec = reference.dropFirst(4)
            if let dash = spec.range(of: ":-") {
                let value = environment[String(spec[..<dash.lowerBound])] ?? ""
                return value.isEmpty ? String(spec[dash.upperBound...]) : value
            }
            let name = String(spec)
            guard let value = environment[name] else {
                report(node, path, "environment variable \(name) is not set (write ${env:\(name):-default} for a default)")
                return nil
            }
            return value
        }
        if reference.hasPrefix("file:") {
            var target = String(reference.dropFirst(5))
            if !target.hasPrefix("/") { target = (baseDirectory as NSString).appendingPathComponent(target) }
            guard let data = FileManager.default.contents(atPath: target) else {
                var isDirectory: ObjCBool = false
                let reason = !FileManager.default.fileExists(atPath: target, isDirectory: &isDirectory) ? "no such file"
                    : isDirectory.boolValue ? "it is a directory" : "permission denied"
                report(node, path, "cannot read \(target) for ${\(reference)}: \(reason)")
                return nil
            }
            guard var value = String(data: data, encoding: .utf8) else {
                report(node, path, "\(target) for ${\(reference)} is not UTF-8 text")
                return nil
            }
            if value.hasSuffix("\n") { value.removeLast() }
            return value
        }
        report(node, path, "unknown interpolation '${\(reference)}': use ${env:NAME} or ${file:PATH}")
        return nil
    }
}

/// A mapping being read; `finish()` reports the keys it may not hold.
final class Fields {
    let node: Node
    let path: String
    private let pairs: [(key: String, keyNode: Node, value: Node)]
    private let known: [String]?
    private unowned let reader: ConfigReader

    init(node: Node, mapping: Node.Mapping, path: String, known: [String]?, reader: ConfigReader) {
        self.node = node
        self.path = path
        self.known = known
        self.reader = reader
        pairs = mapping.map { (key: $0.key.scalar?.string ?? "", keyNode: $0.key, value: $0.value) }
    }

    var keys: [String] { entries.map(\.key) }
    /// Every entry but a duplicate key's first occurrence (see `setAsidePrefix`).
    var entries: [(key: String, keyNode: Node, value: Node)] { pairs.filter { !$0.key.hasPrefix(Self.setAsidePrefix) } }

    func path(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    func take(_ key: String) -> Node? {
        pairs.first { $0.key == key }?.value
    }

    func has(_ key: String) -> Bool { pairs.contains { $0.key == key } }

    /// A duplicate key's first occurrence, set aside by the loader (already reported).
    static let setAsidePrefix = "__gatewayd_duplicate_"

    func finish() {
        guard let known else { return }
        for pair in pairs where !known.contains(pair.key) && !pair.key.hasPrefix(Self.setAsidePrefix) {
            let guess = NearestName.closest(to: pair.key, in: known).map { "did you mean \($0)? " } ?? ""
            reader.report(pair.keyNode, path(pair.key), "unknown key (\(guess)known here: \(known.joined(separator: ", ")))")
        }
    }
}

extension Node {
    /// The resolved YAML tag (`Tag.name` is not public).
    var tagName: Tag.Name { Tag.Name(rawValue: tag.rawValue) }
}
