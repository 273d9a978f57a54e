import Rewriter

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
            switch PathSegment.dots(segment.utf8) {
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

    /// Only paths with "//", "/." or "%" can change: the rest pass with no
    /// allocation. Read as contiguous bytes when the path has them (a walk
    /// by the view's index cost ~40 instructions a byte).
    private static func needsWork(_ bytes: Substring.UTF8View) -> Bool {
        bytes.withContiguousStorageIfAvailable { needsWork($0) } ?? needsWork(Array(bytes))
    }

    private static func needsWork(_ bytes: some Sequence<UInt8>) -> Bool {
        var previous: UInt8 = 0
        for byte in bytes {
            if byte == UInt8(ascii: "%") || previous == UInt8(ascii: "/") && (byte == UInt8(ascii: "/") || byte == UInt8(ascii: ".")) {
                return true
            }
            previous = byte
        }
        return false
    }
}
