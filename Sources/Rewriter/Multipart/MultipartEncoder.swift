/// `multipart/form-data` bodies (RFC 7578): a part per scalar, arrays repeat
/// the name, nested names use brackets, `type: file` values become file parts.
public struct MultipartEncoder: Sendable {
    public var boundary: String
    public var options: QueryOptions

    public init(boundary: String, options: QueryOptions) {
        self.boundary = boundary
        self.options = options
    }

    public var contentType: String { "multipart/form-data; boundary=\(boundary)" }

    /// 24 random hex characters after a fixed prefix: 96 bits nobody can guess.
    public static func randomBoundary() -> String {
        var generator = SystemRandomNumberGenerator()
        var boundary = "gatewayd-"
        for _ in 0..<24 { boundary.append(Character(Unicode.Scalar(hexDigits[Int(generator.next() % 16)]))) }
        return boundary
    }

    /// `fileKeys` are the top-level keys whose values are file values.
    public func encode(_ object: JSONObject, fileKeys: Set<String> = []) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(512)
        let members = options.order == .sorted ? object.sortedByKey() : object.members
        for member in members {
            if fileKeys.contains(member.key), let file = FileValue(member.value) {
                writeFile(file, name: member.key, into: &out)
            } else {
                writeValue(member.value, name: member.key, into: &out)
            }
        }
        out.append(contentsOf: "--\(boundary)--\r\n".utf8)
        return out
    }

    private func writeValue(_ value: JSONValue, name: String, into out: inout [UInt8]) {
        switch value {
        case .array(let elements):
            for element in elements { writeValue(element, name: name, into: &out) }
        case .object(let object):
            let members = options.order == .sorted ? object.sortedByKey() : object.members
            for member in members { writeValue(member.value, name: "\(name)[\(member.key)]", into: &out) }
        case .null:
            if options.nulls != .omit { writeText("", name: name, into: &out) }
        default:
            writeText(options.text(of: value)!, name: name, into: &out)
        }
    }

    private func writeText(_ text: String, name: String, into out: inout [UInt8]) {
        writeDisposition(name: name, filename: nil, into: &out)
        out.append(contentsOf: "\r\n".utf8)
        out.append(contentsOf: text.utf8)
        out.append(contentsOf: "\r\n".utf8)
    }

    private func writeFile(_ file: FileValue, name: String, into out: inout [UInt8]) {
        writeDisposition(name: name, filename: file.filename ?? name, into: &out)
        out.append(contentsOf: "Content-Type: \(file.contentType)\r\n\r\n".utf8)
        out.append(contentsOf: file.bytes)
        out.append(contentsOf: "\r\n".utf8)
    }

    private func writeDisposition(name: String, filename: String?, into out: inout [UInt8]) {
        out.append(contentsOf: "--\(boundary)\r\nContent-Disposition: form-data; name=\"".utf8)
        appendQuoted(name, into: &out)
        if let filename {
            out.append(contentsOf: "\"; filename=\"".utf8)
            appendQuoted(filename, into: &out)
        }
        out.append(contentsOf: "\"\r\n".utf8)
    }

    /// RFC 7578 section 4.2: CR, LF and `"` in names are percent-escaped.
    private func appendQuoted(_ text: String, into out: inout [UInt8]) {
        for byte in text.utf8 {
            switch byte {
            case 0x0D, 0x0A, UInt8(ascii: "\""): PercentEncoding.appendTriplet(byte, to: &out)
            default: out.append(byte)
            }
        }
    }
}

private let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)
