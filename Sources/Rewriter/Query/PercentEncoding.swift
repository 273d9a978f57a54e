/// RFC 3986 percent-encoding: unreserved bytes (`A-Z a-z 0-9 - . _ ~`) stay
/// literal, every other byte of the UTF-8 form becomes `%XX` in uppercase hex.
public enum PercentEncoding {
    @inline(__always)
    public static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
            UInt8(ascii: "_"), UInt8(ascii: "~"):
            true
        default:
            false
        }
    }

    /// Appends `string` escaped exactly once; with `spaceAsPlus` a space is `+`.
    public static func append(_ string: String, to out: inout [UInt8], spaceAsPlus: Bool = false) {
        var string = string
        string.withUTF8 { append(bytes: $0, to: &out, spaceAsPlus: spaceAsPlus) }
    }

    /// Encodes in one pass into stack scratch space, a chunk at a time, and
    /// appends each chunk in one copy: per-byte `Array.append` and branchy
    /// classification dominated profiles, and so did a counting pass.
    public static func append(bytes source: UnsafeBufferPointer<UInt8>, to out: inout [UInt8], spaceAsPlus: Bool = false) {
        let chunk = 256
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: chunk * 3) { target in
            byteClass.withUnsafeBufferPointer { classes in
                var i = 0
                while i < source.count {
                    let end = min(i + chunk, source.count)
                    var j = 0
                    for byte in source[i..<end] {
                        let c = classes[Int(byte)]
                        if c == 1 {
                            target[j] = byte
                            j += 1
                        } else if c == 2 && spaceAsPlus {
                            target[j] = UInt8(ascii: "+")
                            j += 1
                        } else {
                            target[j] = UInt8(ascii: "%")
                            target[j + 1] = upperHexDigit(byte >> 4)
                            target[j + 2] = upperHexDigit(byte & 0xF)
                            j += 3
                        }
                    }
                    out.append(contentsOf: UnsafeBufferPointer(rebasing: target[..<j]))
                    i = end
                }
            }
        }
    }

    /// 1: unreserved, 2: space, 3: escaped.
    private static let byteClass: [UInt8] = (0...255).map { isUnreserved(UInt8($0)) ? 1 : $0 == 0x20 ? 2 : 3 }

    @inlinable
    public static func appendTriplet(_ byte: UInt8, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "%"))
        out.append(upperHexDigit(byte >> 4))
        out.append(upperHexDigit(byte & 0xF))
    }

    @inlinable
    static func upperHexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "A") + nibble - 10
    }

    /// Decodes `%XX` triplets (and `+` as space when asked). A `%` not followed by
    /// two hex digits stays literal, as browsers do; nil when the result is not UTF-8.
    public static func decode(_ bytes: some Collection<UInt8>, plusAsSpace: Bool = false) -> String? {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = bytes.startIndex
        while i != bytes.endIndex {
            let byte = bytes[i]
            if byte == UInt8(ascii: "%") {
                let first = bytes.index(after: i)
                if first != bytes.endIndex, let high = hexValue(bytes[first]) {
                    let second = bytes.index(after: first)
                    if second != bytes.endIndex, let low = hexValue(bytes[second]) {
                        out.append(high << 4 | low)
                        i = bytes.index(after: second)
                        continue
                    }
                }
                out.append(byte)
            } else if plusAsSpace && byte == UInt8(ascii: "+") {
                out.append(0x20)
            } else {
                out.append(byte)
            }
            i = bytes.index(after: i)
        }
        return UTF8Text.string(out)
    }

    public static func decode(_ string: some StringProtocol, plusAsSpace: Bool = false) -> String? {
        decode(string.utf8, plusAsSpace: plusAsSpace)
    }
}
