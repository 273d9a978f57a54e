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
    @inlinable
    public static func append(_ string: String, to out: inout [UInt8], spaceAsPlus: Bool = false) {
        for byte in string.utf8 { append(byte: byte, to: &out, spaceAsPlus: spaceAsPlus) }
    }

    @inlinable
    public static func append(byte: UInt8, to out: inout [UInt8], spaceAsPlus: Bool = false) {
        if isUnreserved(byte) {
            out.append(byte)
        } else if spaceAsPlus && byte == 0x20 {
            out.append(UInt8(ascii: "+"))
        } else {
            appendTriplet(byte, to: &out)
        }
    }

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

    public static func encode(_ string: String, spaceAsPlus: Bool = false) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(string.utf8.count)
        append(string, to: &out, spaceAsPlus: spaceAsPlus)
        return String(decoding: out, as: UTF8.self)
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
        return String(validating: out, as: UTF8.self)
    }

    public static func decode(_ string: some StringProtocol, plusAsSpace: Bool = false) -> String? {
        decode(string.utf8, plusAsSpace: plusAsSpace)
    }
}
