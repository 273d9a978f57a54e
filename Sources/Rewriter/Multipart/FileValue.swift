/// A parameter declared `type: file`: either a `data:` URI (RFC 2397) or an
/// object `{filename, content_type, base64}`.
struct FileValue: Hashable {
    var filename: String?
    var contentType: String
    var bytes: [UInt8]

    init?(_ value: JSONValue) {
        switch value {
        case .string(let uri):
            guard let parsed = Self.parseDataURI(uri) else { return nil }
            self = parsed
        case .object(let object):
            guard case .string(let filename)? = object["filename"], case .string(let encoded)? = object["base64"],
                let bytes = Base64.decode(encoded)
            else { return nil }
            var contentType = "application/octet-stream"
            switch object["content_type"] {
            case nil: break
            case .string(let type)?: contentType = type
            default: return nil
            }
            guard object.allSatisfy({ ["filename", "content_type", "base64"].contains($0.key) }) else { return nil }
            self.filename = filename
            self.contentType = contentType
            self.bytes = bytes
        default:
            return nil
        }
        guard !contentType.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else { return nil }
    }

    /// `data:[<mediatype>][;base64],<data>`; a `name=` or `filename=` media type
    /// parameter (as some browsers write) becomes the file name.
    private static func parseDataURI(_ uri: String) -> FileValue? {
        guard uri.hasPrefix("data:"), let comma = uri.firstIndex(of: ",") else { return nil }
        var parameters = uri[uri.index(uri.startIndex, offsetBy: 5)..<comma].split(separator: ";", omittingEmptySubsequences: false)
        let payload = uri[uri.index(after: comma)...]
        var isBase64 = false
        if parameters.last == "base64" {
            isBase64 = true
            parameters.removeLast()
        }
        var filename: String?
        parameters.removeAll { parameter in
            for key in ["name=", "filename="] where parameter.hasPrefix(key) {
                filename = PercentEncoding.decode(parameter.dropFirst(key.count))
                return true
            }
            return false
        }
        // RFC 2397: an omitted media type means text/plain;charset=US-ASCII.
        var contentType = parameters.joined(separator: ";")
        if contentType.isEmpty {
            contentType = "text/plain;charset=US-ASCII"
        } else if contentType.hasPrefix(";") {
            contentType = "text/plain" + contentType
        }
        let bytes: [UInt8]?
        if isBase64 {
            bytes = PercentEncoding.decode(payload).flatMap(Base64.decode)
        } else {
            bytes = PercentEncoding.decode(payload).map { Array($0.utf8) }
        }
        guard let bytes else { return nil }
        return FileValue(filename: filename, contentType: contentType, bytes: bytes)
    }

    private init(filename: String?, contentType: String, bytes: [UInt8]) {
        self.filename = filename
        self.contentType = contentType
        self.bytes = bytes
    }
}
