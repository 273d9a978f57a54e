import WasmKit

/// A filter's linear memory, as the host reads and writes it. Every pointer
/// and length comes from the guest and is hostile: each access is checked
/// against the memory's size first (WasmKit's own accessors stop the
/// process on an access out of bounds), and a failed check is the ABI's
/// `INVALID_MEMORY_ACCESS`, not a crash.
struct GuestMemory {
    private enum Backing {
        case interpreter(Memory)
        /// Read anew at each access: a grow may move it. Not retained at each
        /// access: the VM that holds this memory holds its instance too.
        case compiled(Unmanaged<CompiledInstance>)
    }

    private let backing: Backing

    init(memory: Memory) { backing = .interpreter(memory) }

    init(compiled: CompiledInstance) { backing = .compiled(.passUnretained(compiled)) }

    var byteCount: Int {
        switch backing {
        case .interpreter(let memory): memory.byteCount
        case .compiled(let instance): instance._withUnsafeGuaranteedRef { $0.memory() }.count
        }
    }

    /// `count` bytes from `address`, or nil when they do not all lie inside the memory.
    private func withBytes<R>(_ address: UInt32, count: Int, _ body: (UnsafeMutableRawBufferPointer) -> R) -> R? {
        guard count >= 0 else { return nil }
        switch backing {
        case .interpreter(let memory):
            guard Int(address) + count <= memory.byteCount else { return nil }
            guard count > 0 else { return body(UnsafeMutableRawBufferPointer(start: nil, count: 0)) }
            return memory.withUnsafeMutableBufferPointer(offset: UInt(address), count: count, body)
        case .compiled(let instance):
            let memory = instance._withUnsafeGuaranteedRef { $0.memory() }
            guard Int(address) + count <= memory.count else { return nil }
            return body(UnsafeMutableRawBufferPointer(rebasing: memory[Int(address)..<Int(address) + count]))
        }
    }

    func read(_ address: UInt32, count: UInt32) -> [UInt8]? {
        withBytes(address, count: Int(count)) { Array($0) }
    }

    /// `count` bytes from `address`, read in place.
    func read<R>(_ address: UInt32, count: UInt32, _ body: (UnsafeRawBufferPointer) -> R) -> R? {
        withBytes(address, count: Int(count)) { body(UnsafeRawBufferPointer($0)) }
    }

    /// Decoded in place (a name or value of up to 15 bytes allocates nothing).
    func readString(_ address: UInt32, count: UInt32) -> String? {
        withBytes(address, count: Int(count)) { String(decoding: UnsafeRawBufferPointer($0), as: UTF8.self) }
    }

    func write(_ bytes: [UInt8], at address: UInt32) -> Bool {
        bytes.withUnsafeBytes { write($0, at: address) }
    }

    func write(_ bytes: UnsafeRawBufferPointer, at address: UInt32) -> Bool {
        withBytes(address, count: bytes.count) { target -> Void in
            if !bytes.isEmpty { target.copyMemory(from: bytes) }
        } != nil
    }

    /// Little-endian, as Wasm's memory is; stored in place, no array made for it.
    func write<Value: FixedWidthInteger>(_ value: Value, at address: UInt32) -> Bool {
        withBytes(address, count: MemoryLayout<Value>.size) { $0.storeBytes(of: value.littleEndian, toByteOffset: 0, as: Value.self) } != nil
    }

    func readUInt32(_ address: UInt32) -> UInt32? {
        withBytes(address, count: 4) { UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self)) }
    }
}
