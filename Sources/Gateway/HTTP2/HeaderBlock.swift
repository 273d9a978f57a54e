import CNGHTTP2

/// An HTTP/2 header block on its way to libnghttp2: names and values in one
/// byte array (one allocation per block), names in lower case.
struct HeaderBlock {
    private var bytes: [UInt8] = []
    private var fields: [(start: Int, nameCount: Int, valueCount: Int, flags: UInt8)] = []

    init(capacity: Int) {
        bytes.reserveCapacity(capacity * 32)
        fields.reserveCapacity(capacity)
    }

    /// `indexed: false` keeps a field that changes on every message (a
    /// request id) out of the HPACK table, where it would only evict what repeats.
    mutating func add(_ name: String, _ value: String, indexed: Bool = true) {
        let start = bytes.count
        // The name copied whole, then lower-cased in place: appended a byte
        // at a time, a block cost ~11 instructions a byte.
        bytes.append(contentsOf: name.utf8)
        var i = start
        while i < bytes.count {
            if bytes[i] &- UInt8(ascii: "A") < 26 { bytes[i] |= 0x20 }
            i += 1
        }
        bytes.append(contentsOf: value.utf8)
        fields.append((start, name.utf8.count, value.utf8.count,
                       UInt8((indexed ? NGHTTP2_NV_FLAG_NONE : NGHTTP2_NV_FLAG_NO_INDEX).rawValue)))
    }

    var count: Int { fields.count }

    /// The block as libnghttp2's name-value array, valid during `body` only
    /// (libnghttp2 copies what it keeps; it never writes through these pointers).
    func withNameValues<T>(_ body: (UnsafeMutablePointer<nghttp2_nv>, Int) -> T) -> T {
        bytes.withUnsafeBufferPointer { bytes in
            withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: max(1, fields.count)) { nvs in
                let base = UnsafeMutablePointer(mutating: bytes.baseAddress ?? UnsafePointer(bitPattern: 1)!)
                for (index, field) in fields.enumerated() {
                    nvs.initializeElement(at: index, to: nghttp2_nv(
                        name: base + field.start, value: base + field.start + field.nameCount,
                        namelen: field.nameCount, valuelen: field.valueCount, flags: field.flags))
                }
                return body(nvs.baseAddress!, fields.count)
            }
        }
    }
}
