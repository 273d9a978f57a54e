/// A request path made canonical before routing, and forwarded as such, so
/// the route that matched and the upstream read the same path (Envoy's
/// `normalize_path` and `merge_slashes`): dot segments removed (RFC 3986
/// section 5.2.4, `%2E` counted as a dot, as Envoy and browsers do) and
/// repeated slashes merged. An escaped slash or backslash (`%2F`, `%5C`) is
/// kept as it is, inside its segment (Envoy's default,
/// `path_with_escaped_slashes_action: KEEP_UNCHANGED`): legacy APIs carry
/// them in identifiers, and routing and the upstream see the same bytes.
enum PathNormalization {
    /// `path` starts with "/" and has no query.
    static func normalize(_ path: Substring) -> Substring {
        guard needsWork(path.utf8) else { return path }
        var kept: [Substring] = []
        var trailingSlash = false
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        for (index, segment) in zip(segments.indices, segments) {
            let last = index == segments.index(before: segments.endIndex)
            switch dots(segment.utf8) {
            case 1:
                trailingSlash = last
            case 2:
                _ = kept.popLast()
                trailingSlash = last
            default:
                if segment.isEmpty {
                    trailingSlash = last
                } else {
                    kept.append(segment)
                    trailingSlash = false
                }
            }
        }
        let joined = "/" + kept.joined(separator: "/")
        return Substring(trailingSlash && !kept.isEmpty ? joined + "/" : joined)
    }

    /// Only paths with "//", "/." or "%" can change: the rest pass with no allocation.
    private static func needsWork(_ bytes: Substring.UTF8View) -> Bool {
        var previous: UInt8 = 0
        for byte in bytes {
            if byte == UInt8(ascii: "%") || previous == UInt8(ascii: "/") && (byte == UInt8(ascii: "/") || byte == UInt8(ascii: ".")) {
                return true
            }
            previous = byte
        }
        return false
    }

    /// 1 for "." and 2 for ".." (either spelled with `%2E`), else 0.
    private static func dots(_ bytes: Substring.UTF8View) -> Int {
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
