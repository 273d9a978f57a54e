/// A filter's module as native code (`engine: compiled`, see
/// `FilterCompiler`): no fuel (compiled code is not metered), `max_memory`
/// the memory's page limit (a grow past it fails as Wasm's `memory.grow` does).
final class CompiledEngine: FilterEngine {
    private let instance: CompiledInstance
    private var callbacks: [(index: UInt32, arity: Int)?] = []
    private var allocator: UInt32?
    private var guestMemory: GuestMemory?
    var memory: GuestMemory { guestMemory! }
    /// The host functions, by the index the glue passes (the module's imports, in order).
    fileprivate let hosts: [FilterVM.HostFunction]
    /// Why the last host call trapped (a thrown error: the guest is unwound, the callback fails with it).
    fileprivate var hostFailure: (any Error)?
    /// The VM owns this engine and outlives each call into it: not retained per host call.
    fileprivate let vm: Unmanaged<FilterVM>

    init(_ vm: FilterVM, library: String) throws(FilterFailure) {
        let filter = vm.filter
        self.vm = .passUnretained(vm)
        do {
            instance = try CompiledInstance(library: library)
        } catch {
            throw FilterFailure(filter.name, error.description)
        }
        var hosts: [FilterVM.HostFunction] = []
        for item in instance.imports { hosts.append(try FilterVM.hostFunction(module: item.module, name: item.name, for: filter)) }
        self.hosts = hosts
        // The engine is the context each import's call comes back with: it owns the instance, which calls back only inside its calls.
        do {
            try instance.start(context: Unmanaged.passUnretained(self).toOpaque(), host: hostEntry, maxMemory: filter.maxMemory)
        } catch {
            throw FilterFailure(filter.name, error.description)
        }
        callbacks = FilterVM.Callback.allCases.map { instance.exports[$0.name] }
        allocator = (instance.exports["proxy_on_memory_allocate"] ?? instance.exports["malloc"])?.index
        guestMemory = GuestMemory(compiled: instance)
    }

    func exports(_ callback: FilterVM.Callback) -> Bool { callbacks[callback.rawValue] != nil }

    /// Older ABIs take fewer arguments: only as many as the export declares are passed.
    func call(_ callback: FilterVM.Callback, _ arguments: CallbackArguments) throws -> UInt32? {
        guard let (index, arity) = callbacks[callback.rawValue] else { return nil }
        let budget = switch callback {
        case .initialize, .main, .start, .vmStart, .configure: CompiledInstance.startBudget
        default: CompiledInstance.callbackBudget
        }
        return UInt32(truncatingIfNeeded: try run(index, budget: budget) { values in
            for position in 0..<min(arity, values.count) { values[position] = position < arguments.count ? UInt64(arguments[position]) : 0 }
        })
    }

    func allocate(_ size: UInt32) throws -> UInt32 {
        guard let allocator else { return 0 }
        return UInt32(truncatingIfNeeded: try run(allocator, budget: CompiledInstance.callbackBudget) { $0[0] = UInt64(size) })
    }

    /// Export `index` with the arguments `fill` writes (on the stack: no array is made for them).
    private func run(_ index: UInt32, budget: Duration, _ fill: (UnsafeMutableBufferPointer<UInt64>) -> Void) throws -> UInt64 {
        let result = withUnsafeTemporaryAllocation(of: UInt64.self, capacity: 8) { values in
            values.initialize(repeating: 0)
            fill(values)
            return instance.invoke(index, UnsafePointer(values.baseAddress!), budget: budget)
        }
        switch result {
        case .success(let value): return value
        case .failure(let trap):
            if let failure = hostFailure.take() { throw failure }
            throw FilterCompiler.Failure(description: CompiledInstance.reason(trap.code))
        }
    }
}

/// Every import of a compiled filter comes here, with its index.
private let hostEntry: CompiledInstance.Host = { context, index, arguments, count, result in
    guard let context else { return 1 }
    // Neither the engine nor its VM is retained for the call: the VM owns the engine, and both outlive it.
    return Unmanaged<CompiledEngine>.fromOpaque(context)._withUnsafeGuaranteedRef { engine in
        guard Int(index) < engine.hosts.count else { return 1 }
        do {
            let status = try engine.vm._withUnsafeGuaranteedRef { vm in
                try engine.hosts[Int(index)](vm, Arguments(UnsafeBufferPointer(start: arguments, count: Int(count))))
            }
            result?.pointee = UInt64(UInt32(bitPattern: status))
            return 0
        } catch {
            engine.hostFailure = error
            return 1
        }
    }
}
