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
/// Parsed by libxml2's pull parser, well-kept and fuzzed: UTF-8 and UTF-16
/// with a BOM, character references and the five predefined entities. What
/// legacy services send most (UTF-8, no DTD, ASCII names) is read first by
/// `XMLScanner`, four times faster; what it declines, libxml2 reads. No DTD is processed at all: a document type
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
        try decode(bytes, namespaces: namespaces, arrays: XMLArrayPaths(arrays), maxDepth: maxDepth)
    }

    public static func decode(_ bytes: [UInt8], namespaces: Namespaces = .keep, arrays: XMLArrayPaths, maxDepth: Int = 64)
        throws(Failure) -> JSONValue {
        guard !bytes.isEmpty else { throw Failure(description: "an empty document") }
        if let document = XMLScanner.decode(bytes, namespaces: namespaces, arrays: arrays, maxDepth: maxDepth) { return document }
        return try libxml2(bytes, namespaces: namespaces, arrays: arrays, maxDepth: maxDepth)
    }

    /// What the fast path declined, and its verdict: libxml2's reader.
    static func libxml2(_ bytes: [UInt8], namespaces: Namespaces, arrays: XMLArrayPaths, maxDepth: Int) throws(Failure) -> JSONValue {
        _ = initialized
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
            var builder = XMLTreeBuilder(arrays: arrays, maxDepth: maxDepth)
            while true {
                let status = xmlTextReaderRead(reader)
                if status == 0 { break }
                guard status == 1 else { throw lastError(reader) }
                if let refusal = take(reader, into: &builder, namespaces: namespaces) { throw Failure(description: refusal) }
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

    /// The reader's current node into the tree; a refusal's reason.
    private static func take(_ reader: OpaquePointer, into builder: inout XMLTreeBuilder, namespaces: Namespaces) -> String? {
        switch xmlReaderTypes(rawValue: UInt32(xmlTextReaderNodeType(reader))) {
        case XML_READER_TYPE_DOCUMENT_TYPE:
            return "a document type declaration (DTDs are refused)"
        case XML_READER_TYPE_ENTITY_REFERENCE, XML_READER_TYPE_ENTITY:
            return "an entity reference"
        case XML_READER_TYPE_ELEMENT:
            let empty = xmlTextReaderIsEmptyElement(reader) == 1
            if let refusal = builder.open(string(namespaces == .keep ? xmlTextReaderConstName(reader) : xmlTextReaderConstLocalName(reader))) {
                return refusal
            }
            while xmlTextReaderMoveToNextAttribute(reader) == 1 {
                let declaration = xmlTextReaderIsNamespaceDecl(reader) == 1
                if declaration, namespaces == .strip { continue }
                let key = string(namespaces == .keep || declaration ? xmlTextReaderConstName(reader) : xmlTextReaderConstLocalName(reader))
                builder.attribute(key, string(xmlTextReaderConstValue(reader)))
            }
            if empty { builder.close() }
        case XML_READER_TYPE_END_ELEMENT:
            builder.close()
        case XML_READER_TYPE_CDATA:
            guard let value = xmlTextReaderConstValue(reader) else { return nil }
            // The reader hands a CDATA section over as written, CR included
            // (xmllint --stream shows it); XML 1.0 §2.11 reads CR LF and a lone CR as LF everywhere.
            let bytes = UnsafeBufferPointer(start: value, count: Int(xmlStrlen(value)))
            if bytes.contains(0x0D) { builder.text(XMLScanner.normalized(bytes)) } else { builder.text(bytes) }
        case XML_READER_TYPE_TEXT, XML_READER_TYPE_SIGNIFICANT_WHITESPACE, XML_READER_TYPE_WHITESPACE:
            guard let value = xmlTextReaderConstValue(reader) else { return nil }
            // Appended at once (a byte at a time was a sixth of a 2 KB answer's translation).
            builder.text(UnsafeBufferPointer(start: value, count: Int(xmlStrlen(value))))
        default:
            // Comments, processing instructions, the XML declaration: not data.
            break
        }
        return nil
    }

    private static func string(_ pointer: UnsafePointer<xmlChar>?) -> String {
        guard let pointer else { return "" }
        return String(cString: pointer)
    }
}
