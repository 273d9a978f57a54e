@_spi(Fuzzing) import WasmKit

/// WasmKit's interpreter: each callback on a fresh fuel budget, memory
/// growth past `max_memory` a trap.
final class InterpretedEngine: FilterEngine {
    private let store: Store
    private let fuel: UInt64
    /// The interpreter's stacks, kept: each invoke otherwise allocates (and
    /// frees) one of `stackSize` bytes. A callback runs on the first; an
    /// allocation the host asks for inside it runs on the second.
    private var stack: ExecutionStack
    private var nestedStack: ExecutionStack
    private var depth = 0
    private let allocator: Function?
    /// The module's callbacks, by `Callback` (nil: not exported), with
    /// their parameter types (read from the store's interner once, not per call).
    private var callbacks: [(function: Function, parameters: [ValueType])?] = Array(repeating: nil, count: FilterVM.Callback.allCases.count)
    let memory: GuestMemory

    init(_ vm: FilterVM) throws(FilterFailure) {
        let filter = vm.filter
        fuel = filter.fuel
        var configuration = EngineConfiguration(fuelMetering: true)
        configuration.stackSize = 1 << 18
        let engine = Engine(configuration: configuration)
        store = Store(engine: engine)
        store.resourceLimiter = MemoryCap(bytes: filter.maxMemory)
        stack = ExecutionStack(engine: engine)
        nestedStack = ExecutionStack(engine: engine)
        var imports = Imports()
        for item in filter.module.module.imports {
            guard case .function(let index) = item.descriptor, let type = filter.module.module.functionType(at: index) else {
                throw FilterFailure(filter.name, "imports \(item.module).\(item.name), which is not a function gatewayd provides")
            }
            let host = try FilterVM.hostFunction(module: item.module, name: item.name, for: filter)
            // The raw form: no array is allocated for the arguments or the result of a call.
            let wide = type.results.first == .i64
            imports.define(module: item.module, name: item.name, Function(store: store, parameters: type.parameters, results: type.results) {
                [unowned vm] _, arguments, results in
                let status = UInt32(bitPattern: try host(vm, Arguments(arguments)))
                if !results.isEmpty { results[0] = wide ? .i64(UInt64(status)) : .i32(status) }
            })
        }
        let instance: Instance
        do {
            instance = try filter.module.module.instantiate(store: store, imports: imports)
        } catch {
            throw FilterFailure(filter.name, "cannot be instantiated: \(FilterFailure.describe(error))")
        }
        guard let memory = instance.exports[memory: "memory"] else { throw FilterFailure(filter.name, "exports no memory") }
        self.memory = GuestMemory(memory: memory)
        allocator = instance.exports[function: "proxy_on_memory_allocate"] ?? instance.exports[function: "malloc"]
        for callback in FilterVM.Callback.allCases {
            callbacks[callback.rawValue] = instance.exports[function: callback.name].map { ($0, $0.type.parameters) }
        }
    }

    func exports(_ callback: FilterVM.Callback) -> Bool { callbacks[callback.rawValue] != nil }

    func call(_ callback: FilterVM.Callback, _ arguments: CallbackArguments) throws -> UInt32? {
        guard let (function, parameters) = callbacks[callback.rawValue] else { return nil }
        var values: [Value] = []
        values.reserveCapacity(parameters.count)
        for index in parameters.indices {
            let argument = index < arguments.count ? arguments[index] : 0
            values.append(parameters[index] == .i64 ? .i64(UInt64(argument)) : .i32(argument))
        }
        store.fuel = Fuel(remaining: fuel)
        let results = try invoke(function, values)
        if case .i32(let value)? = results.first { return value }
        return results.isEmpty ? nil : 0
    }

    func allocate(_ size: UInt32) throws -> UInt32 {
        guard let allocator else { return 0 }
        guard case .i32(let address)? = try invoke(allocator, [.i32(size)]).first else { return 0 }
        return address
    }

    /// Runs `function` on the kept stack of its depth (a fresh one deeper down).
    private func invoke(_ function: Function, _ arguments: [Value]) throws -> [Value] {
        depth += 1
        defer { depth -= 1 }
        switch depth {
        case 1: return try function.invoke(arguments, on: &stack)
        case 2: return try function.invoke(arguments, on: &nestedStack)
        default: return try function.invoke(arguments)
        }
    }
}
