/// A strict RFC 8259 reader: no trailing commas, comments, NaN, lone
/// surrogates or invalid UTF-8; duplicate keys and excessive nesting are errors.
public struct JSONReader {
    public static let defaultMaxDepth = 64

    public static func parse(_ bytes: [UInt8], maxDepth: Int = defaultMaxDepth) throws(JSONError) -> JSONValue {
        do {
            return try bytes.withUnsafeBufferPointer { buffer in
                var reader = Cursor(bytes: buffer, maxDepth: maxDepth)
                reader.skipWhitespace()
                let value = try reader.readValue(depth: 0)
                reader.skipWhitespace()
                guard reader.index == buffer.count else { throw JSONError("unexpected data after the JSON value", at: reader.index) }
                return value
            }
        } catch let error as JSONError {
            throw error
        } catch {
            preconditionFailure("unreachable: \(error)")
        }
    }

    public static func parse(_ text: String, maxDepth: Int = defaultMaxDepth) throws(JSONError) -> JSONValue {
        try parse(Array(text.utf8), maxDepth: maxDepth)
    }

}

private struct Cursor {
    let bytes: UnsafeBufferPointer<UInt8>
    let maxDepth: Int
    var index = 0

    init(bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    mutating func readValue(depth: Int) throws(JSONError) -> JSONValue {
        guard let byte = current else { throw expected("a value") }
        switch byte {
        case UInt8(ascii: "{"): return .object(try readObject(depth: depth + 1))
        case UInt8(ascii: "["): return .array(try readArray(depth: depth + 1))
        case UInt8(ascii: "\""): return .string(try readString())
        case UInt8(ascii: "t"): try expectWord("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectWord("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectWord("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try readNumber())
        default: throw JSONError("unexpected character '\(printable(byte))'", at: index)
        }
    }

    mutating func expectWord(_ word: StaticString) throws(JSONError) {
        let count = word.utf8CodeUnitCount
        let start = index
        guard bytes.count - index >= count else { throw JSONError("invalid literal", at: start) }
        let literal = UnsafeBufferPointer(start: word.utf8Start, count: count)
        for i in 0..<count where bytes[index + i] != literal[i] {
            throw JSONError("invalid literal", at: start)
        }
        index += count
    }

    /// What was expected here; at the end of the input, that the input ended.
    func expected(_ what: String) -> JSONError {
        current == nil ? JSONError("unexpected end of input", at: index) : JSONError("expected \(what)", at: index)
    }

    mutating func readObject(depth: Int) throws(JSONError) -> JSONObject {
        guard depth <= maxDepth else { throw JSONError("nesting deeper than \(maxDepth) levels", at: index) }
        index += 1
        // A request's parameter object (the top level) usually holds a few
        // to a dozen keys: room for 16 at once, not a growth series.
        var object = JSONObject(reservingCapacity: depth == 1 ? 16 : 4)
        var seen: Set<String>?
        skipWhitespace()
        if current == UInt8(ascii: "}") {
            index += 1
            return object
        }
        while true {
            skipWhitespace()
            let keyStart = index
            guard current == UInt8(ascii: "\"") else { throw expected("a string key") }
            let key = try readString()
            // Small objects scan; larger ones switch to a set so parsing stays linear.
            if object.count < 16 {
                if object.index(forKey: key) != nil { throw JSONError("duplicate key \"\(key)\"", at: keyStart) }
            } else {
                if seen == nil { seen = Set(object.lazy.map(\.key)) }
                if !seen!.insert(key).inserted { throw JSONError("duplicate key \"\(key)\"", at: keyStart) }
            }
            skipWhitespace()
            guard current == UInt8(ascii: ":") else { throw expected("':' after an object key") }
            index += 1
            skipWhitespace()
            object.append(key, try readValue(depth: depth))
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"): index += 1; return object
            default: throw expected("',' or '}' in an object")
            }
        }
    }

    mutating func readArray(depth: Int) throws(JSONError) -> [JSONValue] {
        guard depth <= maxDepth else { throw JSONError("nesting deeper than \(maxDepth) levels", at: index) }
        index += 1
        var array: [JSONValue] = []
        skipWhitespace()
        // One allocation for the usual short list instead of growing 1, 2, 4, 8.
        if current != UInt8(ascii: "]") { array.reserveCapacity(8) }
        if current == UInt8(ascii: "]") {
            index += 1
            return array
        }
        while true {
            skipWhitespace()
            array.append(try readValue(depth: depth))
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"): index += 1; return array
            default: throw expected("',' or ']' in an array")
            }
        }
    }

    mutating func readNumber() throws(JSONError) -> String {
        let start = index
        if current == UInt8(ascii: "-") { index += 1 }
        guard let first = current, isDigit(first) else { throw JSONError("invalid number", at: start) }
        index += 1
        if first != UInt8(ascii: "0") { skipDigits() }
        if current == UInt8(ascii: ".") {
            index += 1
            guard let d = current, isDigit(d) else { throw JSONError("invalid number: digits must follow '.'", at: index) }
            skipDigits()
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            index += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
            guard let d = current, isDigit(d) else { throw JSONError("invalid number: digits must follow the exponent", at: index) }
            skipDigits()
        }
        if let next = current, isDigit(next) { throw JSONError("invalid number: leading zero", at: start) }
        return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
    }

    mutating func skipDigits() {
        while let d = current, isDigit(d) { index += 1 }
    }

    mutating func readString() throws(JSONError) -> String {
        index += 1
        let start = index
        // Fast path: no escapes, so the bytes can be validated and used as they are.
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let raw = UnsafeBufferPointer(rebasing: bytes[start..<index])
                index += 1
                guard let string = UTF8Text.string(raw) else {
                    throw JSONError("invalid UTF-8 in a string", at: start)
                }
                return string
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw JSONError("unescaped control character in a string", at: index) }
            index += 1
        }
        var decoded = Array(UnsafeBufferPointer(rebasing: bytes[start..<index]))
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                guard let string = UTF8Text.string(decoded) else {
                    throw JSONError("invalid UTF-8 in a string", at: start)
                }
                return string
            case UInt8(ascii: "\\"):
                try readEscape(into: &decoded)
            case 0..<0x20:
                throw JSONError("unescaped control character in a string", at: index)
            default:
                decoded.append(byte)
                index += 1
            }
        }
        throw JSONError("unterminated string", at: start - 1)
    }

    mutating func readEscape(into out: inout [UInt8]) throws(JSONError) {
        let start = index
        index += 1
        guard let byte = current else { throw JSONError("unterminated escape", at: start) }
        index += 1
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(byte)
        case UInt8(ascii: "b"): out.append(0x08)
        case UInt8(ascii: "f"): out.append(0x0C)
        case UInt8(ascii: "n"): out.append(0x0A)
        case UInt8(ascii: "r"): out.append(0x0D)
        case UInt8(ascii: "t"): out.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try readHex4()
            if (0xD800...0xDBFF).contains(scalar) {
                guard bytes.count - index >= 6, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                    throw JSONError("lone surrogate in \\u escape", at: start)
                }
                index += 2
                let low = try readHex4()
                guard (0xDC00...0xDFFF).contains(low) else { throw JSONError("lone surrogate in \\u escape", at: start) }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00...0xDFFF).contains(scalar) {
                throw JSONError("lone surrogate in \\u escape", at: start)
            }
            out.append(contentsOf: String(Character(Unicode.Scalar(scalar)!)).utf8)
        default:
            throw JSONError("invalid escape '\\\(printable(byte))'", at: start)
        }
    }

    mutating func readHex4() throws(JSONError) -> UInt32 {
        guard bytes.count - index >= 4 else { throw JSONError("truncated \\u escape", at: index) }
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let digit = hexValue(bytes[index]) else { throw JSONError("invalid hex digit in \\u escape", at: index) }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }
}

@inline(__always) func isDigit(_ byte: UInt8) -> Bool {
    byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
}

@inline(__always) func hexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
    default: nil
    }
}

private func printable(_ byte: UInt8) -> String {
    (0x21..<0x7F).contains(byte) ? String(UnicodeScalar(byte)) : "\\x" + String(byte, radix: 16, uppercase: true)
}
