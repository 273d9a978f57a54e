@_spi(Fuzzing) import WasmKit

/// A Proxy-Wasm filter the config names (`filters.NAME`): its module,
/// loaded and checked once, and what each of its VMs is given.
public struct FilterConfig: Sendable {
    /// The key under `filters`, which a route's `filters` names.
    public var name: String
    /// The module's file, as the config names it (resolved against the config's folder).
    public var wasm: String
    /// The plugin configuration the filter reads (`PLUGIN_CONFIGURATION`):
    /// the config's string as it is, or its YAML as JSON.
    public var configuration: [UInt8]
    /// `root_id`: the root context the filter's VMs are created with.
    public var rootID: String
    /// A failed filter lets its call through unfiltered instead of failing it with a 500.
    public var failOpen: Bool
    /// The budget of each callback, in WasmKit fuel (about one per WebAssembly
    /// instruction); the interpreter's only.
    public var fuel: UInt64
    /// The most linear memory a VM of the filter may grow to.
    public var maxMemory: Int
    /// The environment variables the filter sees (none unless the config names them).
    public var environment: [(name: String, value: String)]
    let module: FilterModule
    /// What runs the module.
    public var engine: Engine = .interpreter

    /// `engine`: what runs the module.
    public enum Engine: Sendable, Equatable {
        /// WasmKit's interpreter: fuel-metered.
        case interpreter
        /// Native code built from the module (`FilterCompiler`): the shared object's path.
        case compiled(library: String)
    }

    /// About 10 ms of the interpreter on this project's reference machine
    /// (~250 M fuel a second, release build): what a spinning filter may take
    /// from the other calls on its loop (docs/filters.md).
    public static let defaultFuel: UInt64 = 2_500_000
    /// 64 MiB: the linear memory a VM may grow to by default.
    public static let defaultMaxMemory = 64 << 20
}

/// A module parsed, its ABI version known and what it exports listed.
struct FilterModule: Sendable {
    let module: Module
    /// The ABI version marker it exports, e.g. `proxy_abi_version_0_2_1`.
    let abiVersion: String
    let exports: Set<String>
    /// A reactor's `main(argc, argv)`, run after `_initialize` (a `main` of another type is not).
    let hasMain: Bool

    /// Why a module cannot be a filter.
    enum Problem: Error, CustomStringConvertible {
        case notWebAssembly(String)
        case noABIVersion
        case unknownImports([String])

        var description: String {
            switch self {
            case .notWebAssembly(let reason): "is not a WebAssembly module (\(reason))"
            case .noABIVersion:
                "exports no Proxy-Wasm ABI version (one of \(ProxyWasm.abiVersions.joined(separator: ", "))): is it a Proxy-Wasm filter?"
            case .unknownImports(let names): "imports what gatewayd does not provide: \(names.joined(separator: ", "))"
            }
        }
    }

    init(bytes: [UInt8]) throws(Problem) {
        do {
            module = try parseWasm(bytes: bytes)
        } catch {
            throw .notWebAssembly("\(error)".split(separator: "\n").first.map(String.init) ?? "unreadable")
        }
        exports = Set(module.exports.map(\.name))
        let parsed = module
        hasMain = parsed.exports.contains { export in
            guard export.name == "main", case .function(let index) = export.descriptor else { return false }
            return parsed.functionType(at: index)?.parameters.count == 2
        }
        guard let version = ProxyWasm.abiVersions.first(where: exports.contains) else { throw .noABIVersion }
        abiVersion = version
        let unknown = module.imports.compactMap { item -> String? in
            if case .function = item.descriptor, FilterVM.hostFunction(module: item.module, name: item.name) != nil { return nil }
            return "\(item.module).\(item.name)"
        }
        guard unknown.isEmpty else { throw .unknownImports(unknown) }
    }
}
