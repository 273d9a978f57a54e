/// The convenience parameters as an XML request body, by the inverse of
/// `XMLDecoder`'s convention (xmltodict's `unparse`): a key is an element,
/// `@x` an attribute, `#text` the element's text, an array repeats its
/// element, null is an empty element. Every value is escaped once, so markup
/// in a parameter stays text; a key that is not an XML name, or a value with
/// a character XML 1.0 cannot carry, is the client's 400, never sent.
public struct XMLEncoder: Sendable, Hashable {
    public enum Envelope: String, Sendable, Hashable, CaseIterable {
        case soap11, soap12, none
    }

    public enum Children: String, Sendable, Hashable, CaseIterable {
        /// In the root's namespace, declared as the default one (`elementFormDefault="qualified"`).
        case qualified
        /// In no namespace: the root takes the prefix `tns` instead.
        case unqualified
    }

    public var root: String
    public var namespace: String?
    public var children: Children
    /// Further prefixes, for keys written `p:name`.
    public var namespaces: [(prefix: String, uri: String)]
    public var envelope: Envelope
    /// SOAP 1.1's `SOAPAction`, SOAP 1.2's `action` parameter.
    public var action: String?

    public init(root: String, namespace: String? = nil, children: Children = .qualified, namespaces: [(prefix: String, uri: String)] = [],
                envelope: Envelope = .none, action: String? = nil) {
        self.root = root
        self.namespace = namespace
        self.children = children
        self.namespaces = namespaces
        self.envelope = envelope
        self.action = action
    }

    public static func == (a: XMLEncoder, b: XMLEncoder) -> Bool {
        a.root == b.root && a.namespace == b.namespace && a.children == b.children && a.envelope == b.envelope && a.action == b.action
            && a.namespaces.map(\.prefix) == b.namespaces.map(\.prefix) && a.namespaces.map(\.uri) == b.namespaces.map(\.uri)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(root)
        hasher.combine(namespace)
        hasher.combine(envelope)
    }

    public var contentType: String {
        switch envelope {
        case .soap11: "text/xml; charset=utf-8"
        case .soap12: "application/soap+xml; charset=utf-8" + (action.map { "; action=\"\($0)\"" } ?? "")
        case .none: "application/xml; charset=utf-8"
        }
    }

    static let soap11Namespace = "http://schemas.xmlsoap.org/soap/envelope/"
    static let soap12Namespace = "http://www.w3.org/2003/05/soap-envelope"

    /// The body: the XML declaration, the envelope when asked, and the root with `parameters` inside.
    public func encode(_ parameters: JSONObject) throws(RewriteError) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        out.append(contentsOf: #"<?xml version="1.0" encoding="utf-8"?>"#.utf8)
        out.append(0x0A)
        let soap: String? = switch envelope {
        case .soap11: Self.soap11Namespace
        case .soap12: Self.soap12Namespace
        case .none: nil
        }
        if let soap { out.append(contentsOf: "<soap:Envelope xmlns:soap=\"\(soap)\"><soap:Body>".utf8) }
        var declarations: [(String, String)] = []
        var name = root
        if let namespace {
            if children == .qualified {
                declarations.append(("xmlns", namespace))
            } else {
                name = "tns:" + root
                declarations.append(("xmlns:tns", namespace))
            }
        }
        for (prefix, uri) in namespaces { declarations.append(("xmlns:" + prefix, uri)) }
        try Self.element(name, .object(parameters), declarations: declarations, into: &out)
        if soap != nil { out.append(contentsOf: "</soap:Body></soap:Envelope>".utf8) }
        return out
    }

    /// `xmltodict.unparse({name: value})` without its declaration, as bytes.
    public static func element(_ name: String, _ value: JSONValue, declarations: [(String, String)] = [], into out: inout [UInt8]) throws(RewriteError) {
        if case .array(let items) = value {
            for item in items {
                if case .array = item { throw RewriteError(.invalidParameter, key: name, detail: "parameter '\(name)' nests a list in a list, which XML cannot write") }
                try element(name, item, into: &out)
            }
            return
        }
        guard isName(name) else { throw RewriteError(.invalidParameter, key: name, detail: "'\(name)' is not an XML element name") }
        out.append(UInt8(ascii: "<"))
        out.append(contentsOf: name.utf8)
        for (key, uri) in declarations { try attribute(key, uri, into: &out) }
        var text: String?
        var children: [JSONObject.Member] = []
        switch value {
        case .null:
            break
        case .object(let object):
            for member in object {
                if member.key.hasPrefix("@") {
                    let key = String(member.key.dropFirst())
                    guard let scalar = scalarText(member.value) else {
                        throw RewriteError(.invalidParameter, key: member.key, detail: "attribute '\(member.key)' must be a string, number or boolean")
                    }
                    try attribute(key, scalar, into: &out)
                } else if member.key == "#text" {
                    text = scalarText(member.value)
                } else {
                    children.append(member)
                }
            }
        default:
            text = scalarText(value)
        }
        guard text != nil || !children.isEmpty else {
            // xmltodict's short form of an empty element.
            out.append(contentsOf: "></".utf8)
            out.append(contentsOf: name.utf8)
            out.append(UInt8(ascii: ">"))
            return
        }
        out.append(UInt8(ascii: ">"))
        // xmltodict writes the children, then the text.
        for child in children { try element(child.key, child.value, into: &out) }
        if let text { try escape(text, key: name, attribute: false, into: &out) }
        out.append(contentsOf: "</".utf8)
        out.append(contentsOf: name.utf8)
        out.append(UInt8(ascii: ">"))
    }

    private static func scalarText(_ value: JSONValue) -> String? {
        switch value {
        case .string(let s): s
        case .number(let n): n
        case .bool(let b): b ? "true" : "false"
        default: nil
        }
    }

    /// Python's `quoteattr`, as xmltodict writes attributes: double quotes,
    /// or single ones around a value holding a double quote (both: `&quot;`).
    private static func attribute(_ name: String, _ value: String, into out: inout [UInt8]) throws(RewriteError) {
        guard isName(name) else { throw RewriteError(.invalidParameter, key: "@" + name, detail: "'\(name)' is not an XML attribute name") }
        out.append(UInt8(ascii: " "))
        out.append(contentsOf: name.utf8)
        out.append(UInt8(ascii: "="))
        let double = value.utf8.contains(UInt8(ascii: "\"")), single = value.utf8.contains(UInt8(ascii: "'"))
        let quote = double && !single ? UInt8(ascii: "'") : UInt8(ascii: "\"")
        out.append(quote)
        try escape(value, key: "@" + name, attribute: true, quotesAsEntities: double && single, into: &out)
        out.append(quote)
    }

    private static func escape(_ text: String, key: String, attribute: Bool, quotesAsEntities: Bool = false, into out: inout [UInt8]) throws(RewriteError) {
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out.append(contentsOf: "&amp;".utf8)
            case "<": out.append(contentsOf: "&lt;".utf8)
            case ">": out.append(contentsOf: "&gt;".utf8)
            case "\"" where quotesAsEntities: out.append(contentsOf: "&quot;".utf8)
            case "\n" where attribute: out.append(contentsOf: "&#10;".utf8)
            case "\r" where attribute: out.append(contentsOf: "&#13;".utf8)
            case "\t" where attribute: out.append(contentsOf: "&#9;".utf8)
            default:
                // XML 1.0's Char: no other control character, no surrogate, no U+FFFE/U+FFFF.
                let v = scalar.value
                guard v == 0x9 || v == 0xA || v == 0xD || (0x20...0xD7FF).contains(v) || (0xE000...0xFFFD).contains(v) || v >= 0x10000 else {
                    throw RewriteError(.invalidParameter, key: key, detail: "parameter '\(key)' holds a character XML cannot carry (U+\(String(v, radix: 16, uppercase: true)))")
                }
                out.append(contentsOf: String(scalar).utf8)
            }
        }
    }

    /// XML 1.0's Name (letters and digits beyond ASCII taken as name characters), with at most one `:`.
    public static func isName(_ name: String) -> Bool {
        var scalars = name.unicodeScalars.makeIterator()
        guard let first = scalars.next(), first.properties.isAlphabetic || first == "_" else { return false }
        var colons = 0
        while let scalar = scalars.next() {
            if scalar == ":" {
                colons += 1
                continue
            }
            guard scalar.properties.isAlphabetic || scalar.properties.numericType != nil || scalar == "_" || scalar == "-" || scalar == "." else { return false }
        }
        return colons <= 1 && !name.hasSuffix(":")
    }
}
