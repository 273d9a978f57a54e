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

    static func varintSize(_ value: some BinaryInteger) -> Int {
        var size = 1, rest = UInt64(value) >> 7
        while rest > 0 {
            size += 1
            rest >>= 7
        }
        return size
    }

    mutating func appendByte(_ byte: UInt8) { bytes.append(byte) }

    mutating func append(_ raw: UnsafeBufferPointer<UInt8>) { bytes.append(contentsOf: raw) }

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
        value.withUTF8 { utf8 in
            tag(field, 2)
            varint(UInt64(utf8.count))
            append(utf8)
        }
    }

    mutating func bytes(_ field: Int, _ value: some Collection<UInt8>) {
        tag(field, 2)
        varint(UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    /// A nested message written by `body`, in place after a one-byte length;
    /// a message of 128 bytes or more then moves its own bytes to make room
    /// for a longer one (most of a span's are attributes, shorter).
    mutating func message(_ field: Int, _ body: (inout ProtobufWriter) -> Void) {
        tag(field, 2)
        let at = bytes.count
        bytes.append(0)
        body(&self)
        var length = bytes.count - at - 1
        guard length >= 0x80 else { return bytes[at] = UInt8(length) }
        bytes.insert(contentsOf: repeatElement(0, count: Self.varintSize(length) - 1), at: at)
        var i = at
        while length >= 0x80 {
            bytes[i] = UInt8(truncatingIfNeeded: length) | 0x80
            length >>= 7
            i += 1
        }
        bytes[i] = UInt8(length)
    }

    /// A string field of `first`, a space and `second`, without joining them first.
    mutating func string(_ field: Int, _ first: String, _ second: String) {
        var (first, second) = (first, second)
        tag(field, 2)
        varint(UInt64(first.utf8.count + 1 + second.utf8.count))
        first.withUTF8 { append($0) }
        bytes.append(UInt8(ascii: " "))
        second.withUTF8 { append($0) }
    }
}
