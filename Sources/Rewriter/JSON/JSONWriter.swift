/// Compact JSON output: key order kept, numbers as spelled, only what RFC 8259
/// requires escaped (`"`, `\` and control characters; `/` stays literal).
public enum JSONWriter {
    public static func write(_ value: JSONValue, into out: inout [UInt8]) {
        switch value {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let spelling): out.append(contentsOf: spelling.utf8)
        case .string(let s): writeString(s, into: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (i, element) in elements.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                write(element, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            write(object, into: &out)
        }
    }

    public static func write(_ object: JSONObject, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        for (i, member) in object.members.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            writeString(member.key, into: &out)
            out.append(UInt8(ascii: ":"))
            write(member.value, into: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    public static func bytes(_ value: JSONValue) -> [UInt8] {
        var out: [UInt8] = []
        // Grown from empty, a 200-byte answer was copied five times on its way.
        out.reserveCapacity(256)
        write(value, into: &out)
        return out
    }

    public static func string(_ value: JSONValue) -> String {
        String(decoding: bytes(value), as: UTF8.self)
    }

    public static func writeString(_ string: String, into out: inout [UInt8]) {
        var string = string
        string.withUTF8 { writeString($0, into: &out) }
    }

    /// Runs that need no escape are appended whole: a byte at a time was a
    /// twentieth of a translated answer's cost.
    static func writeString(_ bytes: UnsafeBufferPointer<UInt8>, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var run = 0
        for (index, byte) in bytes.enumerated() where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run..<index]))
            out.append(UInt8(ascii: "\\"))
            switch byte {
            case 0x0A: out.append(UInt8(ascii: "n"))
            case 0x0D: out.append(UInt8(ascii: "r"))
            case 0x09: out.append(UInt8(ascii: "t"))
            case 0x08: out.append(UInt8(ascii: "b"))
            case 0x0C: out.append(UInt8(ascii: "f"))
            case 0..<0x20:
                out.append(contentsOf: "u00".utf8)
                out.append(lowerHex[Int(byte >> 4)])
                out.append(lowerHex[Int(byte & 0xF)])
            default: out.append(byte)
            }
            run = index + 1
        }
        out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run...]))
        out.append(UInt8(ascii: "\""))
    }
}

private let lowerHex: [UInt8] = Array("0123456789abcdef".utf8)
