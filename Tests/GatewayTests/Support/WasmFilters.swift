import Foundation
import WAT

/// Proxy-Wasm filters written in WAT for the tests: the ABI marker, a
/// memory, a bump allocator that wraps, and root callbacks that say yes,
/// around each test's own imports and callbacks.
enum WasmFilter {
    static func wat(imports: String = "", data: String = "", globals: String = "", configure: String = "(i32.const 1)", _ callbacks: String) -> String {
        """
        (module
          \(imports)
          (memory (export "memory") 2)
          (global $heap (mut i32) (i32.const 8192))
          \(globals)
          \(data)
          (func (export "proxy_abi_version_0_2_1"))
          (func (export "proxy_on_memory_allocate") (param $size i32) (result i32)
            (local $at i32)
            (if (i32.gt_u (i32.add (global.get $heap) (local.get $size)) (i32.const 131072)) (then (global.set $heap (i32.const 8192))))
            (local.set $at (global.get $heap))
            (global.set $heap (i32.add (global.get $heap) (local.get $size)))
            (local.get $at))
          (func (export "proxy_on_context_create") (param i32 i32))
          (func (export "proxy_on_vm_start") (param i32 i32) (result i32) (i32.const 1))
          (func (export "proxy_on_configure") (param i32 i32) (result i32) \(configure))
          \(callbacks)
        )
        """
    }

    /// `wat` compiled into a .wasm file of its own; its path.
    static func file(_ wat: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("filter-\(UUID().uuidString).wasm").path
        try Data(try wat2wasm(wat)).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// A serialized Proxy-Wasm map as a WAT data string (`\\xx` escapes).
    static func map(_ pairs: [(String, String)]) -> String {
        var bytes: [UInt8] = []
        func u32(_ value: Int) { bytes += withUnsafeBytes(of: UInt32(value).littleEndian, Array.init) }
        u32(pairs.count)
        for (name, value) in pairs {
            u32(name.utf8.count)
            u32(value.utf8.count)
        }
        for (name, value) in pairs { bytes += Array(name.utf8) + [0] + Array(value.utf8) + [0] }
        return bytes.map { String(format: "\\%02x", $0) }.joined()
    }

    /// Adds `x-signed: yes` to the request.
    static let sign = wat(
        imports: #"(import "env" "proxy_add_header_map_value" (func $add (param i32 i32 i32 i32 i32) (result i32)))"#,
        data: #"(data (i32.const 100) "x-signed") (data (i32.const 200) "yes")"#,
        """
        (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
          (drop (call $add (i32.const 0) (i32.const 100) (i32.const 8) (i32.const 200) (i32.const 3)))
          (i32.const 0))
        """)
}
