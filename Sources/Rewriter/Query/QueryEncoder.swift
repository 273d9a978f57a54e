/// Writes parameters as `application/x-www-form-urlencoded` pairs, for a URL
/// query or a form body. Key prefixes are escaped once as they are built, so
/// nothing is ever escaped twice.
public struct QueryEncoder: Sendable {
    public var options: QueryOptions
    public var spaceAsPlus: Bool

    public init(options: QueryOptions, spaceAsPlus: Bool) {
        self.options = options
        self.spaceAsPlus = spaceAsPlus
    }

    /// Appends the pairs of `object` to `out`, `&`-separated. When `out` already
    /// holds pairs, pass `separatorFirst` so the first new pair is joined with `&`.
    public func encode(_ object: JSONObject, into out: inout [UInt8], separatorFirst: Bool = false) {
        var needsSeparator = separatorFirst
        var prefix: [UInt8] = []
        prefix.reserveCapacity(64)
        encodeMembers(of: object, prefix: &prefix, topLevel: true, out: &out, needsSeparator: &needsSeparator)
    }

    public func encode(_ object: JSONObject) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        encode(object, into: &out)
        return out
    }

    private func encodeMembers(
        of object: JSONObject, prefix: inout [UInt8], topLevel: Bool, out: inout [UInt8], needsSeparator: inout Bool
    ) {
        let mark = prefix.count
        func member(_ m: JSONObject.Member) {
            if !topLevel {
                if options.nested == .brackets {
                    prefix.append(contentsOf: [UInt8(ascii: "%"), UInt8(ascii: "5"), UInt8(ascii: "B")])
                } else {
                    prefix.append(UInt8(ascii: "."))
                }
            }
            PercentEncoding.append(m.key, to: &prefix, spaceAsPlus: spaceAsPlus)
            if !topLevel && options.nested == .brackets {
                prefix.append(contentsOf: [UInt8(ascii: "%"), UInt8(ascii: "5"), UInt8(ascii: "D")])
            }
            encodeValue(m.value, prefix: &prefix, out: &out, needsSeparator: &needsSeparator)
            prefix.removeSubrange(mark...)
        }
        if options.order == .sorted {
            for m in object.sortedByKey() { member(m) }
        } else {
            for m in object.members { member(m) }
        }
    }

    private func encodeValue(_ value: JSONValue, prefix: inout [UInt8], out: inout [UInt8], needsSeparator: inout Bool) {
        switch value {
        case .object(let object):
            encodeMembers(of: object, prefix: &prefix, topLevel: false, out: &out, needsSeparator: &needsSeparator)
        case .array(let elements):
            encodeArray(elements, prefix: &prefix, out: &out, needsSeparator: &needsSeparator)
        case .null:
            switch options.nulls {
            case .omit: return
            case .empty: emit(prefix, value: "", out: &out, needsSeparator: &needsSeparator)
            case .bare:
                if needsSeparator { out.append(UInt8(ascii: "&")) }
                out.append(contentsOf: prefix)
                needsSeparator = true
            }
        default:
            emit(prefix, value: options.text(of: value)!, out: &out, needsSeparator: &needsSeparator)
        }
    }

    private func encodeArray(_ elements: [JSONValue], prefix: inout [UInt8], out: inout [UInt8], needsSeparator: inout Bool) {
        let mark = prefix.count
        switch options.arrays {
        case .comma where elements.allSatisfy(\.isScalar):
            // Nulls are omitted from the list unless another null style is asked for.
            let texts = elements.compactMap { options.text(of: $0) ?? (options.nulls == .omit ? nil : "") }
            guard !texts.isEmpty else { return }
            if needsSeparator { out.append(UInt8(ascii: "&")) }
            out.append(contentsOf: prefix)
            out.append(UInt8(ascii: "="))
            for (i, text) in texts.enumerated() {
                if i > 0 { out.append(contentsOf: [UInt8(ascii: "%"), UInt8(ascii: "2"), UInt8(ascii: "C")]) }
                PercentEncoding.append(text, to: &out, spaceAsPlus: spaceAsPlus)
            }
            needsSeparator = true
        case .repeat:
            for element in elements { encodeValue(element, prefix: &prefix, out: &out, needsSeparator: &needsSeparator) }
        case .indices:
            for (i, element) in elements.enumerated() {
                prefix.append(contentsOf: [UInt8(ascii: "%"), UInt8(ascii: "5"), UInt8(ascii: "B")])
                prefix.append(contentsOf: String(i).utf8)
                prefix.append(contentsOf: [UInt8(ascii: "%"), UInt8(ascii: "5"), UInt8(ascii: "D")])
                encodeValue(element, prefix: &prefix, out: &out, needsSeparator: &needsSeparator)
                prefix.removeSubrange(mark...)
            }
        case .brackets, .comma:
            // `comma` lists only scalars; an array holding containers falls back to brackets.
            prefix.append(contentsOf: [UInt8(ascii: "%"), UInt8(ascii: "5"), UInt8(ascii: "B"),
                                       UInt8(ascii: "%"), UInt8(ascii: "5"), UInt8(ascii: "D")])
            for element in elements { encodeValue(element, prefix: &prefix, out: &out, needsSeparator: &needsSeparator) }
            prefix.removeSubrange(mark...)
        }
    }

    @inline(__always)
    private func emit(_ key: [UInt8], value: String, out: inout [UInt8], needsSeparator: inout Bool) {
        if needsSeparator { out.append(UInt8(ascii: "&")) }
        out.append(contentsOf: key)
        out.append(UInt8(ascii: "="))
        PercentEncoding.append(value, to: &out, spaceAsPlus: spaceAsPlus)
        needsSeparator = true
    }
}
