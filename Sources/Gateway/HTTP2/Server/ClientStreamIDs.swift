import CNGHTTP2

/// The stream ids a client skipped (RFC 9113 §5.1.1: ids only grow, so a
/// skipped id is closed for good). libnghttp2 ignores a HEADERS frame on an
/// id below the newest it cannot place, since it cannot tell a skipped id
/// from a stream it forgot after closing it; this knows the skipped ones,
/// so a request on one is the connection error the RFC asks for.
struct ClientStreamIDs {
    private var newest: Int32 = -1
    /// Ranges of skipped odd ids, newest last. Bounded: a client that skips
    /// ids more often than this is checked against its latest gaps only.
    private var skipped: [ClosedRange<Int32>] = []
    static let rangesKept = 16

    /// A HEADERS frame begins on `id`: whether it may open or continue a stream.
    mutating func headers(on id: Int32) -> Bool {
        guard id & 1 == 1 else { return true }
        guard id > newest else { return !skipped.contains { $0.contains(id) } }
        if id > newest + 2 {
            if skipped.count == Self.rangesKept { skipped.removeFirst() }
            skipped.append((newest + 2)...(id - 2))
        }
        newest = id
        return true
    }
}
