import Foundation

/// One VM's instance of a compiled filter. wabt's runtime keeps its trap
/// target and call depth in process globals, so each instance loads its own
/// copy of the shared object (copied, loaded, then unlinked): a VM is used
/// on one event loop only, and each copy's globals are that loop's.
final class CompiledInstance {
    /// What each import calls: the VM, the import's index, its arguments;
    /// writes the result, returns nonzero to trap.
    typealias Host = @convention(c) (UnsafeMutableRawPointer?, UInt32, UnsafePointer<UInt64>?, UInt32, UnsafeMutablePointer<UInt64>?) -> Int32
    private typealias New = @convention(c) (UnsafeMutableRawPointer?, Host, UInt32, UInt64, UnsafeMutablePointer<Int32>?) -> OpaquePointer?
    private typealias Invoke = @convention(c) (OpaquePointer?, UInt32, UnsafePointer<UInt64>?, UnsafeMutablePointer<UInt64>?, UInt64) -> Int32
    private typealias MemoryOf = @convention(c) (OpaquePointer?, UnsafeMutablePointer<UInt64>?) -> UnsafeMutablePointer<UInt8>?
    private typealias Free = @convention(c) (OpaquePointer?) -> Void

    private let handle: UnsafeMutableRawPointer
    private var instance: OpaquePointer?
    private let new: New
    private let invokeExport: Invoke
    private let memoryOf: MemoryOf
    private let free: Free
    /// Each import's module and name, by the index its glue passes.
    let imports: [(module: String, name: String)]
    /// Each export's index and parameter count, by name.
    let exports: [String: (index: UInt32, arity: Int)]

    /// Loads a copy of `library` (`start` instantiates it).
    init(library: String) throws(FilterCompiler.Failure) {
        let copy = "\(library).\(getpid()).\(UInt64.random(in: .min ... .max))"
        guard (try? FileManager.default.copyItem(atPath: library, toPath: copy)) != nil else {
            throw FilterCompiler.Failure(description: "cannot copy \(library)")
        }
        defer { unlink(copy) }
        guard let handle = dlopen(copy, RTLD_NOW | RTLD_LOCAL) else {
            throw FilterCompiler.Failure(description: "cannot load \(library): \(dlerror().map { String(cString: $0) } ?? "?")")
        }
        func symbol<T>(_ name: String, as: T.Type) throws(FilterCompiler.Failure) -> T {
            guard let address = dlsym(handle, name) else {
                dlclose(handle)
                throw FilterCompiler.Failure(description: "\(library) has no \(name): not built by this gatewayd")
            }
            return unsafeBitCast(address, to: T.self)
        }
        new = try symbol("gw_new", as: New.self)
        invokeExport = try symbol("gw_invoke", as: Invoke.self)
        memoryOf = try symbol("gw_memory", as: MemoryOf.self)
        free = try symbol("gw_free", as: Free.self)
        let importCount = Int(try symbol("gw_import_count", as: UnsafePointer<UInt32>.self).pointee)
        let importNames = try symbol("gw_import_names", as: UnsafePointer<UnsafePointer<CChar>?>.self)
        imports = (0..<importCount).map { (String(cString: importNames[2 * $0]!), String(cString: importNames[2 * $0 + 1]!)) }
        let exportCount = Int(try symbol("gw_export_count", as: UnsafePointer<UInt32>.self).pointee)
        let exportNames = try symbol("gw_export_names", as: UnsafePointer<UnsafePointer<CChar>?>.self)
        let arity = try symbol("gw_export_arity", as: UnsafePointer<UInt8>.self)
        exports = Dictionary((0..<exportCount).map { (String(cString: exportNames[$0]!), (UInt32($0), Int(arity[$0]))) }) { first, _ in first }
        self.handle = handle
    }

    /// Instantiates the module; `context` is handed back to `host` on each import's call.
    func start(context: UnsafeMutableRawPointer, host: Host, maxMemory: Int) throws(FilterCompiler.Failure) {
        var trap: Int32 = 0
        instance = new(context, host, UInt32(clamping: maxMemory / 65536), UInt64(Self.startBudget.nanosecondCount), &trap)
        guard instance != nil else { throw FilterCompiler.Failure(description: "cannot be instantiated: out of memory") }
        if trap != 0 {
            throw FilterCompiler.Failure(description: trap == -2 ? "max_memory reached (\(maxMemory) bytes)" : "cannot be instantiated: \(Self.reason(trap))")
        }
    }

    deinit {
        if let instance { free(instance) }
        dlclose(handle)
    }

    /// How long a callback may run (compiled code has no fuel): a call's and
    /// a tick's, and the start's (instantiation, `_initialize`,
    /// `proxy_on_vm_start`, `proxy_on_configure`), which may do more once.
    static let callbackBudget = Duration.milliseconds(10)
    static let startBudget = Duration.seconds(1)

    /// Runs export `index` within `budget`: its result, or the trap's code.
    func invoke(_ index: UInt32, _ arguments: UnsafePointer<UInt64>, budget: Duration) -> Result<UInt64, Trap> {
        guard let instance else { return .failure(Trap(code: -1)) }
        var result: UInt64 = 0
        let trap = invokeExport(instance, index, arguments, &result, UInt64(budget.nanosecondCount))
        return trap == 0 ? .success(result) : .failure(Trap(code: trap))
    }

    struct Trap: Error {
        let code: Int32
    }

    /// The guest's linear memory as it is now (a grow moves it).
    func memory() -> UnsafeMutableRawBufferPointer {
        guard let instance else { return UnsafeMutableRawBufferPointer(start: nil, count: 0) }
        var size: UInt64 = 0
        let base = memoryOf(instance, &size)
        return UnsafeMutableRawBufferPointer(start: base, count: base == nil ? 0 : Int(size))
    }

    /// wabt's `wasm_rt_trap_t`, for the log.
    static func reason(_ code: Int32) -> String {
        switch code {
        case 1: "trap: out of bounds memory access"
        case 2: "trap: integer overflow"
        case 3: "trap: integer divide by zero"
        case 4: "trap: invalid conversion to integer"
        case 5: "trap: unreachable"
        case 6: "trap: indirect call type mismatch"
        case 7: "trap: uncaught exception"
        case 8: "trap: call stack exhausted"
        case 100: "deadline exceeded: the callback ran past its time"
        default: "trap \(code)"
        }
    }
}
