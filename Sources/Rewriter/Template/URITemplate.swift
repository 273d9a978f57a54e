/// An RFC 6570 level 4 URI template, parsed once (at config load) and expanded
/// per call: all operators, explode (`*`) and prefix (`:n`) modifiers.
public struct URITemplate: Sendable, Hashable, CustomStringConvertible {
    enum Part: Sendable, Hashable {
        /// Literal text, already percent-encoded where RFC 6570 requires it.
        case literal([UInt8])
        case expression(Expression)
    }

    struct Expression: Sendable, Hashable {
        var op: Operator
        var variables: [VarSpec]
    }

    struct VarSpec: Sendable, Hashable {
        var name: String
        var explode: Bool
        var prefix: Int?
    }

    enum Operator: Sendable, Hashable {
        case simple, reserved, fragment, label, pathSegment, pathParameter, query, continuation

        init?(_ byte: UInt8) {
            switch byte {
            case UInt8(ascii: "+"): self = .reserved
            case UInt8(ascii: "#"): self = .fragment
            case UInt8(ascii: "."): self = .label
            case UInt8(ascii: "/"): self = .pathSegment
            case UInt8(ascii: ";"): self = .pathParameter
            case UInt8(ascii: "?"): self = .query
            case UInt8(ascii: "&"): self = .continuation
            default: return nil
            }
        }
    }

    public let source: String
    let parts: [Part]

    public var description: String { source }

    /// Every variable name the template mentions, in order of appearance.
    public let variableNames: [String]

    /// The variables of the path: those before its first literal `?` or
    /// `{?...}` / `{&...}` expression.
    public var pathVariableNames: [String] {
        var names: [String] = []
        for part in parts {
            switch part {
            case .literal(let bytes) where bytes.contains(UInt8(ascii: "?")): return names
            case .expression(let e) where e.op == .query || e.op == .continuation: return names
            case .expression(let e): for v in e.variables where !names.contains(v.name) { names.append(v.name) }
            case .literal: continue
            }
        }
        return names
    }

    /// True when an expression uses the fragment operator `{#...}`.
    public var hasFragment: Bool {
        parts.contains { if case .expression(let e) = $0 { e.op == .fragment } else { false } }
    }

    public init(_ source: String) throws(URITemplateError) {
        self.source = source
        var parser = URITemplateParser(source)
        let parts = try parser.parse()
        var names: [String] = []
        for case .expression(let e) in parts {
            for v in e.variables where !names.contains(v.name) { names.append(v.name) }
        }
        self.parts = parts
        self.variableNames = names
    }
}

public struct URITemplateError: Error, Hashable, Sendable, CustomStringConvertible {
    public var message: String
    /// Character offset in the template text.
    public var offset: Int
    public var description: String { "\(message) at character \(offset + 1)" }
}

private struct URITemplateParser {
    let scalars: [Unicode.Scalar]
    var index = 0

    init(_ source: String) { scalars = Array(source.unicodeScalars) }

    mutating func parse() throws(URITemplateError) -> [URITemplate.Part] {
        var parts: [URITemplate.Part] = []
        var literal: [UInt8] = []
        while index < scalars.count {
            let scalar = scalars[index]
            if scalar == "{" {
                if !literal.isEmpty { parts.append(.literal(literal)); literal = [] }
                parts.append(.expression(try parseExpression()))
                continue
            }
            if scalar == "%" {
                guard index + 2 < scalars.count, isHex(scalars[index + 1]), isHex(scalars[index + 2]) else {
                    throw URITemplateError(message: "'%' must start a percent-encoded triplet", offset: index)
                }
                literal.append(contentsOf: String(String.UnicodeScalarView(scalars[index...index + 2])).utf8)
                index += 3
                continue
            }
            guard isLiteral(scalar) else {
                throw URITemplateError(message: "character '\(scalar.escaped(asASCII: true))' is not allowed in a template", offset: index)
            }
            for byte in String(scalar).utf8 {
                if byte < 0x80 { literal.append(byte) } else { PercentEncoding.appendTriplet(byte, to: &literal) }
            }
            index += 1
        }
        if !literal.isEmpty { parts.append(.literal(literal)) }
        return parts
    }

    mutating func parseExpression() throws(URITemplateError) -> URITemplate.Expression {
        let open = index
        index += 1
        guard index < scalars.count else { throw URITemplateError(message: "unclosed expression", offset: open) }
        var op = URITemplate.Operator.simple
        let first = scalars[index]
        if first.isASCII, let parsed = URITemplate.Operator(UInt8(first.value)) {
            op = parsed
            index += 1
        } else if "=,!@|".unicodeScalars.contains(first) {
            throw URITemplateError(message: "operator '\(first)' is reserved for future extensions", offset: index)
        }
        var variables: [URITemplate.VarSpec] = []
        while true {
            variables.append(try parseVarSpec())
            guard index < scalars.count else { throw URITemplateError(message: "unclosed expression", offset: open) }
            if scalars[index] == "," { index += 1; continue }
            if scalars[index] == "}" { index += 1; return URITemplate.Expression(op: op, variables: variables) }
            throw URITemplateError(message: "unexpected '\(scalars[index].escaped(asASCII: true))' in an expression", offset: index)
        }
    }

    mutating func parseVarSpec() throws(URITemplateError) -> URITemplate.VarSpec {
        let start = index
        var name = ""
        var previousWasDot = true
        while index < scalars.count {
            let s = scalars[index]
            if s == "%" {
                guard index + 2 < scalars.count, isHex(scalars[index + 1]), isHex(scalars[index + 2]) else {
                    throw URITemplateError(message: "'%' must start a percent-encoded triplet", offset: index)
                }
                name.unicodeScalars.append(contentsOf: scalars[index...index + 2])
                index += 3
                previousWasDot = false
            } else if s == "." {
                if previousWasDot { throw URITemplateError(message: "a variable name cannot have an empty part", offset: index) }
                name.unicodeScalars.append(s)
                index += 1
                previousWasDot = true
            } else if ("0"..."9").contains(s) || ("a"..."z").contains(s) || ("A"..."Z").contains(s) || s == "_" {
                name.unicodeScalars.append(s)
                index += 1
                previousWasDot = false
            } else {
                break
            }
        }
        if name.isEmpty { throw URITemplateError(message: "expected a variable name", offset: start) }
        if previousWasDot { throw URITemplateError(message: "a variable name cannot end with '.'", offset: index - 1) }
        var spec = URITemplate.VarSpec(name: name, explode: false, prefix: nil)
        guard index < scalars.count else { return spec }
        if scalars[index] == "*" {
            spec.explode = true
            index += 1
        } else if scalars[index] == ":" {
            index += 1
            let digitsStart = index
            var length = 0
            while index < scalars.count, ("0"..."9").contains(scalars[index]), index - digitsStart < 4 {
                length = length * 10 + Int(scalars[index].value - 48)
                index += 1
            }
            guard index > digitsStart, scalars[digitsStart] != "0" else {
                throw URITemplateError(message: "a prefix length must be 1 to 9999", offset: digitsStart)
            }
            spec.prefix = length
        }
        return spec
    }

    func isHex(_ s: Unicode.Scalar) -> Bool { s.isASCII && hexValue(UInt8(s.value)) != nil }

    /// RFC 6570 section 2.1: everything but CTL, SP, `"%<>\^`{|}`; `'` is
    /// allowed (erratum 6937).
    func isLiteral(_ s: Unicode.Scalar) -> Bool {
        if !s.isASCII { return true }
        switch s.value {
        case 0..<0x21, 0x7F, 0x22, 0x25, 0x3C, 0x3E, 0x5C, 0x5E, 0x60, 0x7B, 0x7C, 0x7D: return false
        default: return true
        }
    }
}
