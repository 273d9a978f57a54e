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
        let path = decodingUnreserved(path)
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

    /// Percent-encoded unreserved characters decoded (RFC 3986 section
    /// 6.2.2.2): `/%6cogin` is `/login` to routing and to the upstream, so
    /// an upstream that decodes them cannot be reached past a route's limits.
    /// Every other triplet is kept as it is.
    private static func decodingUnreserved(_ path: Substring) -> Substring {
        let bytes = Array(path.utf8)
        var decoded: [UInt8] = []
        decoded.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count,
               let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2]), isUnreserved(high << 4 | low) {
                decoded.append(high << 4 | low)
                index += 3
            } else {
                decoded.append(bytes[index])
                index += 1
            }
        }
        return decoded.count == bytes.count ? path : Substring(String(decoding: decoded, as: UTF8.self))
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"): true
        default: false
        }
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
