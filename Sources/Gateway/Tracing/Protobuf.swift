import NIOCore

/// The Protocol Buffers wire format, as much of it as an OTLP export needs,
/// written straight into room a ByteBuffer reserved for it
/// (`writeProtobuf`), every write checked against that room: a span is
/// ~40 small writes, each here a bounds check and a store, where it costs
/// ~100 instructions through ByteBuffer's own writes and ~40 through
/// `[UInt8]` appends (docs/benchmarks.md, "Span export").
/// Hand-written: the only OTLP encoder in reach is swift-otel's, whose
/// per-span objects, locks and build cost the span export cannot afford.
struct ProtobufWriter {
    private let out: UnsafeMutableRawBufferPointer
    private(set) var count = 0

    fileprivate init(_ out: UnsafeMutableRawBufferPointer) { self.out = out }

    /// Room for `needed` bytes, from the returned offset on: one bounds
    /// check for a run of small writes (`putVarint`, `put`).
    @inline(__always)
    mutating func room(_ needed: Int) -> Int {
        precondition(needed <= out.count - count, "protobuf written past its bound")
        let at = count
        count += needed
        return at
    }

    @inline(__always)
    mutating func appendByte(_ byte: UInt8) { out[room(1)] = byte }

    mutating func append(_ raw: UnsafeRawBufferPointer) {
        guard !raw.isEmpty else { return }
        let at = room(raw.count)
        UnsafeMutableRawBufferPointer(rebasing: out[at..<(at + raw.count)]).copyMemory(from: raw)
    }

    mutating func append(_ text: String) {
        // A native string's bytes are read in place; another is made contiguous first.
        if text.utf8.withContiguousStorageIfAvailable({ append(UnsafeRawBufferPointer($0)) }) != nil { return }
        var text = text
        text.withUTF8 { append(UnsafeRawBufferPointer($0)) }
    }

    mutating func append(_ text: Substring) {
        var text = text
        text.withUTF8 { append(UnsafeRawBufferPointer($0)) }
    }

    mutating func append(_ bytes: [UInt8]) { bytes.withUnsafeBytes { append($0) } }

    mutating func append(_ buffer: ByteBuffer) { buffer.withUnsafeReadableBytes { append($0) } }

    /// `value` as a varint at `start`, in room already taken; returns where it ends.
    @inline(__always)
    func putVarint(_ value: Int, at start: Int) -> Int {
        var value = UInt64(value), at = start
        while value >= 0x80 {
            out[at] = UInt8(truncatingIfNeeded: value) | 0x80
            value >>= 7
            at += 1
        }
        out[at] = UInt8(value)
        return at + 1
    }

    /// `count` bytes from `source` at `at`, in room already taken.
    @inline(__always)
    func put(_ source: UnsafeRawPointer, count: Int, at: Int) {
        (out.baseAddress! + at).copyMemory(from: source, byteCount: count)
    }

    @inline(__always)
    mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            appendByte(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        appendByte(UInt8(value))
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

    /// A length-delimited field's tag and length, its bytes to follow.
    mutating func lengthDelimited(_ field: Int, length: Int) {
        tag(field, 2)
        varint(UInt64(length))
    }

    /// int64, uint32, enum and bool fields (negative numbers take ten bytes, as protobuf says).
    mutating func integer(_ field: Int, _ value: Int) {
        tag(field, 0)
        varint(UInt64(bitPattern: Int64(value)))
    }

    mutating func fixed64(_ field: Int, _ value: UInt64) {
        tag(field, 1)
        out.storeBytes(of: value.littleEndian, toByteOffset: room(8), as: UInt64.self)
    }

    mutating func fixed32(_ field: Int, _ value: UInt32) {
        tag(field, 5)
        out.storeBytes(of: value.littleEndian, toByteOffset: room(4), as: UInt32.self)
    }

    mutating func string(_ field: Int, _ value: String) {
        tag(field, 2)
        varint(UInt64(value.utf8.count))
        append(value)
    }

    mutating func bytes(_ field: Int, _ value: UnsafeRawBufferPointer) {
        tag(field, 2)
        varint(UInt64(value.count))
        append(value)
    }

    /// A nested message written by `body`, in place after a one-byte length;
    /// a message of 128 bytes or more then moves its own bytes to make room
    /// for a longer one (most of a span's are attributes, shorter).
    mutating func message(_ field: Int, _ body: (inout ProtobufWriter) -> Void) {
        tag(field, 2)
        let at = room(1)
        body(&self)
        var length = count - at - 1
        guard length >= 0x80 else {
            out[at] = UInt8(length)
            return
        }
        let extra = Self.varintSize(length) - 1
        _ = room(extra)
        (out.baseAddress! + at + 1 + extra).copyMemory(from: out.baseAddress! + at + 1, byteCount: length)
        var i = at
        while length >= 0x80 {
            out[i] = UInt8(truncatingIfNeeded: length) | 0x80
            length >>= 7
            i += 1
        }
        out[i] = UInt8(length)
    }

    /// A string field of `first`, a space and `second`, without joining them first.
    mutating func string(_ field: Int, _ first: String, _ second: String) {
        tag(field, 2)
        varint(UInt64(first.utf8.count + 1 + second.utf8.count))
        append(first)
        appendByte(UInt8(ascii: " "))
        append(second)
    }
}

extension ByteBuffer {
    /// Writes what `body` writes, which must fit in `bound` bytes (checked).
    mutating func writeProtobuf(bound: Int, _ body: (inout ProtobufWriter) -> Void) {
        writeWithUnsafeMutableBytes(minimumWritableBytes: bound) { room in
            var out = ProtobufWriter(UnsafeMutableRawBufferPointer(rebasing: room[..<bound]))
            body(&out)
            return out.count
        }
    }
}

extension [UInt8] {
    /// What `body` writes, which must fit in `bound` bytes (checked).
    init(protobufBound bound: Int, _ body: (inout ProtobufWriter) -> Void) {
        self.init(unsafeUninitializedCapacity: bound) { room, count in
            var out = ProtobufWriter(UnsafeMutableRawBufferPointer(room))
            body(&out)
            count = out.count
        }
    }
}
