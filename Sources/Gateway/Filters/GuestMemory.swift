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

    func readString(_ address: UInt32, count: UInt32) -> String? {
        read(address, count: count).map { String(decoding: $0, as: UTF8.self) }
    }

    func write(_ bytes: [UInt8], at address: UInt32) -> Bool {
        guard contains(address, count: bytes.count) else { return false }
        guard !bytes.isEmpty else { return true }
        memory.withUnsafeMutableBufferPointer(offset: UInt(address), count: bytes.count) { target in
            bytes.withUnsafeBytes { target.copyMemory(from: $0) }
        }
        return true
    }

    func write(_ value: UInt32, at address: UInt32) -> Bool {
        var bytes: [UInt8] = []
        ProxyWasm.append(value, to: &bytes)
        return write(bytes, at: address)
    }

    func write(_ value: UInt64, at address: UInt32) -> Bool {
        var bytes: [UInt8] = []
        ProxyWasm.append(value, to: &bytes)
        return write(bytes, at: address)
    }

    func readUInt32(_ address: UInt32) -> UInt32? {
        read(address, count: 4).flatMap { ProxyWasm.readUInt32($0, at: 0) }
    }
}
