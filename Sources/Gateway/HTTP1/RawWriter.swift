import NIOCore

/// Copies strings into memory already sized for them. Every copy is
/// checked against the room there is: a size measured wrong traps here
/// rather than writing past the buffer (the round trips in
/// HeadWriterRoundTripTests, AccessLogTests and the fuzz targets
/// FuzzHeadWriter and FuzzAccessLine prove the measures). Hand-written:
/// one capacity check per head or line instead of one per append.
struct RawWriter {
    let raw: UnsafeMutableRawBufferPointer
    var at = 0

    init(_ raw: UnsafeMutableRawBufferPointer) { self.raw = raw }

    private func ensure(_ count: Int) {
        precondition(count <= raw.count - at, "measured too small")
    }

    mutating func put(_ byte: UInt8) {
        ensure(1)
        raw[at] = byte
        at += 1
    }

    mutating func put(_ bytes: UnsafeRawBufferPointer) {
        ensure(bytes.count)
        if let base = bytes.baseAddress { (raw.baseAddress! + at).copyMemory(from: base, byteCount: bytes.count) }
        at += bytes.count
    }

    mutating func put(_ string: StaticString) {
        put(UnsafeRawBufferPointer(start: string.utf8Start, count: string.utf8CodeUnitCount))
    }

    /// `literal` between two bytes, with one room check: an access line's
    /// ` key=`, where three checked copies cost ~120 instructions a key.
    mutating func put(_ before: UInt8, _ literal: StaticString, _ after: UInt8) {
        let count = literal.utf8CodeUnitCount
        ensure(count + 2)
        raw[at] = before
        (raw.baseAddress! + at + 1).copyMemory(from: literal.utf8Start, byteCount: count)
        raw[at + count + 1] = after
        at += count + 2
    }

    mutating func put(_ bytes: [UInt8]) { bytes.withUnsafeBytes { put($0) } }

    mutating func put(_ string: String) {
        if string.utf8.withContiguousStorageIfAvailable({ put(UnsafeRawBufferPointer($0)) }) == nil {
            for byte in string.utf8 { put(byte) }
        }
    }

    /// `value` in decimal, zero-padded to `minimumDigits`.
    mutating func putDecimal(_ value: UInt, minimumDigits: Int = 1) {
        let digits = max(ByteBuffer.decimalDigits(value), minimumDigits)
        ensure(digits)
        var rest = value
        for index in stride(from: at + digits - 1, through: at, by: -1) {
            raw[index] = UInt8(ascii: "0") + UInt8(rest % 10)
            rest /= 10
        }
        at += digits
    }

    mutating func putField(_ name: String, _ value: String) {
        put(name)
        putPair(.colon, .space)
        put(value)
        putPair(.cr, .lf)
    }

    mutating func putField(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        put(name)
        putPair(.colon, .space)
        put(value)
        putPair(.cr, .lf)
    }

    /// Two bytes in one store: a field's `: ` and `\r\n` went through
    /// `memcpy` as static strings, a call each.
    private mutating func putPair(_ first: UInt8, _ second: UInt8) {
        ensure(2)
        raw.storeBytes(of: (UInt16(first) | UInt16(second) << 8).littleEndian, toByteOffset: at, as: UInt16.self)
        at += 2
    }
}
