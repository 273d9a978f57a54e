import CLibXML2

/// An XML document as JSON, by xmltodict's defaults (the most used
/// convention): an element is a key; an attribute is `@name`; text is the
/// element's string, or `#text` beside attributes or children; repeated
/// siblings are an array (`arrays` forces one for the paths named); an
/// empty element is null; whitespace between elements is dropped (text is
/// trimmed); CDATA is text. `keep` writes names as written (`soap:Body`,
/// and `@xmlns:soap`); `strip` writes local names and drops namespace
/// declarations.
///
/// Parsed by libxml2's pull parser, well-kept and fuzzed, rather than by
/// hand: UTF-8 and UTF-16 with a BOM, character references and the five
/// predefined entities. No DTD is processed at all: a document type
/// declaration is refused where it appears, before any entity in it could
/// be used, and nothing is fetched (no network, no external entity), so XXE
/// and entity-expansion bombs are impossible by construction.
public enum XMLDecoder {
    public enum Namespaces: String, Sendable, Hashable, CaseIterable {
        case strip, keep
    }

    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// Why, in full, for the log (line and libxml2's message).
        public let description: String
    }

    /// `arrays`: element paths from the root (`/Envelope/Body/User/Tag`, names
    /// as `namespaces` writes them) whose element is always in an array.
    public static func decode(_ bytes: [UInt8], namespaces: Namespaces = .keep, arrays: Set<String> = [], maxDepth: Int = 64)
        throws(Failure) -> JSONValue {
        _ = initialized
        guard !bytes.isEmpty else { throw Failure(description: "an empty document") }
        // No DTD loading, no entity substitution, no network; libxml2's messages
        // are read from its last error, not printed.
        let options = Int32(XML_PARSE_NONET.rawValue | XML_PARSE_NOERROR.rawValue | XML_PARSE_NOWARNING.rawValue)
        // libxml2 reads the bytes in place, without a copy: the reader lives and
        // dies inside the closure, where the pointer is valid. (UInt8 memory read
        // as CChar: a signedness variant, which Swift lets alias.)
        return try bytes.withUnsafeBufferPointer { buffer throws(Failure) -> JSONValue in
            let text = UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self)
            guard let reader = xmlReaderForMemory(text, Int32(clamping: buffer.count), nil, nil, options) else {
                throw Failure(description: "libxml2 could not start a reader")
            }
            defer { xmlFreeTextReader(reader) }
            xmlResetLastError()
            var builder = Builder(namespaces: namespaces, arrays: arrays, maxDepth: maxDepth)
            while true {
                let status = xmlTextReaderRead(reader)
                if status == 0 { break }
                guard status == 1 else { throw lastError(reader) }
                if let refusal = builder.take(reader) { throw Failure(description: refusal) }
            }
            guard let document = builder.document else { throw Failure(description: "no root element") }
            return document
        }
    }

    /// libxml2 is set up once per process, before any thread parses.
    private static let initialized: Void = xmlInitParser()

    private static func lastError(_ reader: OpaquePointer) -> Failure {
        guard let error = xmlGetLastError() else { return Failure(description: "not well-formed") }
        let message = error.pointee.message.map { String(cString: $0) } ?? "not well-formed"
        var trimmed = Substring(message)
        while trimmed.last?.isWhitespace == true { trimmed = trimmed.dropLast() }
        return Failure(description: "line \(error.pointee.line): \(trimmed)")
    }

    /// One element being read: its attributes, children and text so far.
    private struct Frame {
        var name: String
        var path: String
        var members = JSONObject()
        var hasContent = false
        var text: [UInt8] = []
    }

    private struct Builder {
        let namespaces: Namespaces
        let arrays: Set<String>
        let maxDepth: Int
        var stack: [Frame] = []
        var document: JSONValue?

        init(namespaces: Namespaces, arrays: Set<String>, maxDepth: Int) {
            self.namespaces = namespaces
            self.arrays = arrays
            self.maxDepth = maxDepth
        }

        /// The reader's current node into the tree; a refusal's reason.
        mutating func take(_ reader: OpaquePointer) -> String? {
            switch xmlReaderTypes(rawValue: UInt32(xmlTextReaderNodeType(reader))) {
            case XML_READER_TYPE_DOCUMENT_TYPE:
                return "a document type declaration (DTDs are refused)"
            case XML_READER_TYPE_ENTITY_REFERENCE, XML_READER_TYPE_ENTITY:
                return "an entity reference"
            case XML_READER_TYPE_ELEMENT:
                guard stack.count < maxDepth else { return "deeper than \(maxDepth) elements" }
                guard document == nil else { return "content after the root element" }
                let name = Self.string(namespaces == .keep ? xmlTextReaderConstName(reader) : xmlTextReaderConstLocalName(reader))
                var frame = Frame(name: name, path: (stack.last?.path ?? "") + "/" + name)
                let empty = xmlTextReaderIsEmptyElement(reader) == 1
                while xmlTextReaderMoveToNextAttribute(reader) == 1 {
                    let declaration = xmlTextReaderIsNamespaceDecl(reader) == 1
                    if declaration, namespaces == .strip { continue }
                    let key = Self.string(namespaces == .keep || declaration ? xmlTextReaderConstName(reader) : xmlTextReaderConstLocalName(reader))
                    frame.members.append("@" + key, .string(Self.string(xmlTextReaderConstValue(reader))))
                    frame.hasContent = true
                }
                stack.append(frame)
                if empty { end() }
            case XML_READER_TYPE_END_ELEMENT:
                end()
            case XML_READER_TYPE_TEXT, XML_READER_TYPE_CDATA, XML_READER_TYPE_SIGNIFICANT_WHITESPACE, XML_READER_TYPE_WHITESPACE:
                guard !stack.isEmpty, let value = xmlTextReaderConstValue(reader) else { return nil }
                // Appended at once (a byte at a time was a sixth of a 2 KB answer's translation).
                stack[stack.count - 1].text.append(contentsOf: UnsafeBufferPointer(start: value, count: Int(xmlStrlen(value))))
            default:
                // Comments, processing instructions, the XML declaration: not data.
                break
            }
            return nil
        }

        /// The element on top is complete: its value goes to its parent (or is the document).
        private mutating func end() {
            var frame = stack.removeLast()
            let text = Self.trimmed(frame.text)
            let value: JSONValue
            if frame.hasContent {
                if let text { frame.members.append("#text", .string(text)) }
                value = .object(frame.members)
            } else {
                value = text.map(JSONValue.string) ?? .null
            }
            guard !stack.isEmpty else {
                var root = JSONObject()
                root.append(frame.name, arrays.contains(frame.path) ? .array([value]) : value)
                document = .object(root)
                return
            }
            stack[stack.count - 1].hasContent = true
            var members = stack[stack.count - 1].members
            stack[stack.count - 1].members = JSONObject()
            if let index = members.index(forKey: frame.name) {
                if case .array(var elements) = members[index].value {
                    elements.append(value)
                    members.setValue(.array(elements), at: index)
                } else {
                    members.setValue(.array([members[index].value, value]), at: index)
                }
            } else {
                members.append(frame.name, arrays.contains(frame.path) ? .array([value]) : value)
            }
            stack[stack.count - 1].members = members
        }

        /// Text with the XML whitespace around it dropped; nil when nothing is left.
        private static func trimmed(_ bytes: [UInt8]) -> String? {
            func space(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D }
            guard let first = bytes.firstIndex(where: { !space($0) }), let last = bytes.lastIndex(where: { !space($0) }) else { return nil }
            return String(decoding: bytes[first...last], as: UTF8.self)
        }

        private static func string(_ pointer: UnsafePointer<xmlChar>?) -> String {
            guard let pointer else { return "" }
            return String(cString: pointer)
        }
    }
}
