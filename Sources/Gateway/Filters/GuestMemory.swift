import WasmKit

/// A filter's linear memory, as the host reads and writes it. Every pointer
/// and length comes from the guest and is hostile: each access is checked
/// against the memory's size first (WasmKit's own accessors stop the
/// process on an access out of bounds), and a failed check is the ABI's
/// `INVALID_MEMORY_ACCESS`, not a crash.
struct GuestMemory {
    let memory: Memory

    /// Whether `count` bytes from `address` lie inside the memory.
    func contains(_ address: UInt32, count: Int) -> Bool {
        count >= 0 && Int(address) + count <= memory.byteCount
    }

    func read(_ address: UInt32, count: UInt32) -> [UInt8]? {
        guard contains(address, count: Int(count)) else { return nil }
        guard count > 0 else { return [] }
        return memory.withUnsafeBufferPointer(offset: UInt(address), count: Int(count)) { Array($0) }
    }

    /// Decoded in place (a name or value of up to 15 bytes allocates nothing).
    func readString(_ address: UInt32, count: UInt32) -> String? {
        guard contains(address, count: Int(count)) else { return nil }
        guard count > 0 else { return "" }
        return memory.withUnsafeBufferPointer(offset: UInt(address), count: Int(count)) { String(decoding: $0, as: UTF8.self) }
    }

    func write(_ bytes: [UInt8], at address: UInt32) -> Bool {
        bytes.withUnsafeBytes { write($0, at: address) }
    }

    func write(_ bytes: UnsafeRawBufferPointer, at address: UInt32) -> Bool {
        guard contains(address, count: bytes.count) else { return false }
        guard !bytes.isEmpty else { return true }
        memory.withUnsafeMutableBufferPointer(offset: UInt(address), count: bytes.count) { $0.copyMemory(from: bytes) }
        return true
    }

    /// Little-endian, as Wasm's memory is; stored in place, no array made for it.
    func write<Value: FixedWidthInteger>(_ value: Value, at address: UInt32) -> Bool {
        let size = MemoryLayout<Value>.size
        guard contains(address, count: size) else { return false }
        memory.withUnsafeMutableBufferPointer(offset: UInt(address), count: size) { target in
            target.storeBytes(of: value.littleEndian, toByteOffset: 0, as: Value.self)
        }
        return true
    }

    func readUInt32(_ address: UInt32) -> UInt32? {
        guard contains(address, count: 4) else { return nil }
        return memory.withUnsafeBufferPointer(offset: UInt(address), count: 4) { UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self)) }
    }
}
