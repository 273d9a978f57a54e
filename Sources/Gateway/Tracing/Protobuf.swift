/// The Protocol Buffers wire format, as much of it as an OTLP export needs.
/// Hand-written: the only OTLP encoder in reach is swift-otel's, whose
/// per-span objects, locks and build cost the span export cannot afford.
struct ProtobufWriter {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int = 0) { bytes.reserveCapacity(capacity) }

    mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    private mutating func tag(_ field: Int, _ wireType: UInt64) { varint(UInt64(field) << 3 | wireType) }

    /// int64, uint32, enum and bool fields (negative numbers take ten bytes, as protobuf says).
    mutating func integer(_ field: Int, _ value: Int) {
        tag(field, 0)
        varint(UInt64(bitPattern: Int64(value)))
    }

    mutating func fixed64(_ field: Int, _ value: UInt64) {
        tag(field, 1)
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func fixed32(_ field: Int, _ value: UInt32) {
        tag(field, 5)
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func string(_ field: Int, _ value: String) {
        var value = value
        value.withUTF8 { self.bytes(field, $0) }
    }

    mutating func bytes(_ field: Int, _ value: some Collection<UInt8>) {
        tag(field, 2)
        varint(UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    /// A nested message written by `body`: written in place, then its length
    /// put before it (moving only its own bytes).
    mutating func message(_ field: Int, _ body: (inout ProtobufWriter) -> Void) {
        tag(field, 2)
        let start = bytes.count
        body(&self)
        var length = ProtobufWriter()
        length.varint(UInt64(bytes.count - start))
        bytes.insert(contentsOf: length.bytes, at: start)
    }
}
