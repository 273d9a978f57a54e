extension URITemplate.Operator {
    var first: UInt8? {
        switch self {
        case .simple, .reserved: nil
        case .fragment: UInt8(ascii: "#")
        case .label: UInt8(ascii: ".")
        case .pathSegment: UInt8(ascii: "/")
        case .pathParameter: UInt8(ascii: ";")
        case .query: UInt8(ascii: "?")
        case .continuation: UInt8(ascii: "&")
        }
    }

    var separator: UInt8 {
        switch self {
        case .simple, .reserved, .fragment: UInt8(ascii: ",")
        case .label: UInt8(ascii: ".")
        case .pathSegment: UInt8(ascii: "/")
        case .pathParameter: UInt8(ascii: ";")
        case .query, .continuation: UInt8(ascii: "&")
        }
    }

    var named: Bool { self == .pathParameter || self == .query || self == .continuation }
    /// What follows a name whose value is empty: `;x` but `?x=`.
    var emptyNeedsEquals: Bool { self == .query || self == .continuation }
    var allowsReserved: Bool { self == .reserved || self == .fragment }
}

extension URITemplate {
    /// Expands the template. `lookup` gives a variable's value (nil, null, an
    /// empty array or an empty object are "undefined" and expand to nothing);
    /// `text` turns a scalar into its string form.
    public func expand(
        lookup: (String) -> JSONValue?,
        text: (JSONValue) -> String? = { QueryOptions().text(of: $0) }
    ) -> [UInt8] {
        expandMarkingPath(lookup: lookup, text: text).bytes
    }

    /// The expansion, and where its path ends: at the template's first
    /// literal `?` or its first `{?...}` / `{&...}` expression.
    func expandMarkingPath(lookup: (String) -> JSONValue?, text: (JSONValue) -> String?) -> (bytes: [UInt8], pathEnd: Int) {
        var out: [UInt8] = []
        out.reserveCapacity(source.utf8.count + 32)
        var pathEnd: Int?
        for part in parts {
            switch part {
            case .literal(let bytes):
                if pathEnd == nil, let mark = bytes.firstIndex(of: UInt8(ascii: "?")) { pathEnd = out.count + mark }
                out.append(contentsOf: bytes)
            case .expression(let expression):
                if pathEnd == nil, expression.op == .query || expression.op == .continuation { pathEnd = out.count }
                expand(expression, lookup: lookup, text: text, into: &out)
            }
        }
        return (out, pathEnd ?? out.count)
    }

    /// The first variable with a prefix modifier (`{var:3}`) whose value is
    /// a list or an object, which RFC 6570 section 2.4.1 does not define.
    public func prefixedComposite(lookup: (String) -> JSONValue?) -> String? {
        for case .expression(let expression) in parts {
            for spec in expression.variables where spec.prefix != nil {
                switch lookup(spec.name) {
                case .array(let elements) where !elements.isEmpty: return spec.name
                case .object(let object) where !object.isEmpty: return spec.name
                default: continue
                }
            }
        }
        return nil
    }

    public func expand(_ variables: JSONObject, text: (JSONValue) -> String? = { QueryOptions().text(of: $0) }) -> String {
        String(decoding: expand(lookup: { variables[$0] }, text: text), as: UTF8.self)
    }

    private func expand(
        _ expression: Expression, lookup: (String) -> JSONValue?, text: (JSONValue) -> String?, into out: inout [UInt8]
    ) {
        let op = expression.op
        var isFirst = true
        for spec in expression.variables {
            guard let value = lookup(spec.name) else { continue }
            let items: Items
            switch value {
            case .null: continue
            case .array(let elements):
                let list = elements.compactMap { $0.isScalar ? text($0) : nil }
                if list.isEmpty { continue }
                items = .list(list)
            case .object(let object):
                let pairs = object.members.compactMap { m in m.value.isScalar ? text(m.value).map { (m.key, $0) } : nil }
                if pairs.isEmpty { continue }
                items = .pairs(pairs)
            default:
                guard let string = text(value) else { continue }
                items = .string(string)
            }
            if isFirst {
                if let first = op.first { out.append(first) }
                isFirst = false
            } else {
                out.append(op.separator)
            }
            switch items {
            case .string(var string):
                if let prefix = spec.prefix { string = String(String.UnicodeScalarView(string.unicodeScalars.prefix(prefix))) }
                if op.named { appendName(spec.name, empty: string.isEmpty, op: op, into: &out) }
                append(string, op: op, into: &out)
            case .list(let list) where spec.explode:
                for (i, element) in list.enumerated() {
                    if i > 0 { out.append(op.separator) }
                    if op.named { appendName(spec.name, empty: element.isEmpty, op: op, into: &out) }
                    append(element, op: op, into: &out)
                }
            case .list(let list):
                if op.named { appendName(spec.name, empty: false, op: op, into: &out) }
                for (i, element) in list.enumerated() {
                    if i > 0 { out.append(UInt8(ascii: ",")) }
                    append(element, op: op, into: &out)
                }
            case .pairs(let pairs) where spec.explode:
                for (i, (key, element)) in pairs.enumerated() {
                    if i > 0 { out.append(op.separator) }
                    append(key, op: op, into: &out)
                    if op.named && element.isEmpty {
                        if op.emptyNeedsEquals { out.append(UInt8(ascii: "=")) }
                    } else {
                        out.append(UInt8(ascii: "="))
                    }
                    append(element, op: op, into: &out)
                }
            case .pairs(let pairs):
                if op.named { appendName(spec.name, empty: false, op: op, into: &out) }
                for (i, (key, element)) in pairs.enumerated() {
                    if i > 0 { out.append(UInt8(ascii: ",")) }
                    append(key, op: op, into: &out)
                    out.append(UInt8(ascii: ","))
                    append(element, op: op, into: &out)
                }
            }
        }
    }

    private enum Items {
        case string(String)
        case list([String])
        case pairs([(String, String)])
    }

    private func appendName(_ name: String, empty: Bool, op: Operator, into out: inout [UInt8]) {
        out.append(contentsOf: name.utf8)
        if !empty || op.emptyNeedsEquals { out.append(UInt8(ascii: "=")) }
    }

    /// U (unreserved only) or U+R (reserved characters and existing triplets kept).
    private func append(_ string: String, op: Operator, into out: inout [UInt8]) {
        guard op.allowsReserved else {
            PercentEncoding.append(string, to: &out)
            return
        }
        let bytes = Array(string.utf8)
        var i = 0
        while i < bytes.count {
            let byte = bytes[i]
            if byte == UInt8(ascii: "%"), i + 2 < bytes.count, hexValue(bytes[i + 1]) != nil, hexValue(bytes[i + 2]) != nil {
                out.append(contentsOf: bytes[i...i + 2])
                i += 3
                continue
            }
            if PercentEncoding.isUnreserved(byte) || isReserved(byte) {
                out.append(byte)
            } else {
                PercentEncoding.appendTriplet(byte, to: &out)
            }
            i += 1
        }
    }

    private func isReserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: ":"), UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#"), UInt8(ascii: "["), UInt8(ascii: "]"),
            UInt8(ascii: "@"), UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("),
            UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="):
            true
        default: false
        }
    }
}
