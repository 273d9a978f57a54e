/// What a path segment is to an upstream that resolves it (RFC 3986 section 5.2.4).
public enum PathSegment {
    /// 1 for "." and 2 for ".." (either spelled with `%2E`, as Envoy and
    /// browsers count it), else 0.
    public static func dots(_ bytes: some Sequence<UInt8>) -> Int {
        var count = 0
        var iterator = bytes.makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: ".") {
                count += 1
            } else if byte == UInt8(ascii: "%"), iterator.next() == UInt8(ascii: "2"), iterator.next().map({ $0 | 0x20 }) == UInt8(ascii: "e") {
                count += 1
            } else {
                return 0
            }
            if count > 2 { return 0 }
        }
        return count
    }
}
