import Foundation
import Rewriter
import CoreMetrics
import Logging
import Yams

extension ConfigReader {
    /// `filters: {NAME: {wasm, engine, configuration, root_id, fail_open, fuel, max_memory, environment}}`:
    /// each module is loaded, and its root context started and configured,
    /// here, so `check` and a reload report a broken filter with its line.
    func readFilters(_ node: Node, _ path: String) -> [FilterConfig] {
        guard let filters = mapping(node, path, known: nil) else { return [] }
        return filters.entries.compactMap { entry in readFilter(entry.key, entry.value, filters.path(entry.key)) }
    }

    private func readFilter(_ name: String, _ node: Node, _ path: String) -> FilterConfig? {
        guard let fields = mapping(node, path, known: ["wasm", "engine", "configuration", "root_id", "fail_open", "fuel", "max_memory", "environment"])
        else { return nil }
        defer { fields.finish() }
        guard let wasmNode = fields.take("wasm"), let wasm = string(wasmNode, fields.path("wasm")) else {
            if !fields.has("wasm") { report(node, fields.path("wasm"), "missing: the filter's .wasm module") }
            return nil
        }
        var configuration: [UInt8] = []
        if let n = fields.take("configuration") {
            if case .scalar(let scalar) = n {
                configuration = Array(scalar.string.utf8)
            } else if let json = json(n, fields.path("configuration")) {
                configuration = JSONWriter.bytes(json)
            }
        }
        var rootID = ""
        if let n = fields.take("root_id"), let v = string(n, fields.path("root_id")) { rootID = v }
        var failOpen = false
        if let n = fields.take("fail_open"), let v = bool(n, fields.path("fail_open")) { failOpen = v }
        let engineNode = fields.take("engine")
        let compiled = engineNode.flatMap { oneOf($0, fields.path("engine"), FilterEngineName.self) } == .compiled
        var fuel = FilterConfig.defaultFuel
        if let n = fields.take("fuel"), let v = int(n, fields.path("fuel"), in: 1000...Int.max) {
            fuel = UInt64(v)
            if compiled { report(n, fields.path("fuel"), "a compiled filter runs unmetered: remove fuel, or use engine: interpreter") }
        }
        var maxMemory = FilterConfig.defaultMaxMemory
        if let n = fields.take("max_memory"), let v = int(n, fields.path("max_memory"), in: 65536...(4 << 30)) { maxMemory = v }
        var environment: [(name: String, value: String)] = []
        if let n = fields.take("environment"), let names = strings(n, fields.path("environment")) {
            environment = names.compactMap { name in
                guard let value = self.environment[name] else {
                    report(n, fields.path("environment"), "environment variable \(name) is not set")
                    return nil
                }
                return (name, value)
            }
        }
        var file = wasm
        if !file.hasPrefix("/") { file = (baseDirectory as NSString).appendingPathComponent(file) }
        guard let data = FileManager.default.contents(atPath: file) else {
            report(wasmNode, fields.path("wasm"), "cannot read \(file)")
            return nil
        }
        let module: FilterModule
        do {
            module = try FilterModule(bytes: [UInt8](data))
        } catch {
            report(wasmNode, fields.path("wasm"), "\(file) \(error)")
            return nil
        }
        var filter = FilterConfig(name: name, wasm: wasm, configuration: configuration, rootID: rootID, failOpen: failOpen, fuel: fuel,
                                  maxMemory: maxMemory, environment: environment, module: module)
        if compiled, let engineNode {
            do {
                filter.engine = .compiled(library: try FilterCompiler.library(for: [UInt8](data), environment: self.environment))
            } catch {
                report(engineNode, fields.path("engine"), "\(file) \(error)")
                return nil
            }
        }
        // Started once here: a module that fails to start or to take its configuration fails the config.
        do {
            _ = try FilterVM.start(filter, services: FilterServices(logger: Logger(label: "gatewayd.filter"), shared: Self.checkState))
        } catch {
            report(wasmNode, fields.path("wasm"), "\(file): \(error.reason)")
            return nil
        }
        return filter
    }

    /// Shared data and metrics of the VMs started only to check a config.
    private static let checkState = FilterSharedState(factory: NOOPMetricsHandler.instance)

    /// A list of filter names (`default_filters`, `routes[].filters`): each must be declared.
    func readFilterNames(_ node: Node, _ path: String, declared: [FilterConfig]) -> [String]? {
        guard let names = strings(node, path) else { return nil }
        for name in names where !declared.contains(where: { $0.name == name }) {
            let known = declared.map(\.name).joined(separator: ", ")
            report(node, path, "unknown filter '\(name)' (declared: \(known.isEmpty ? "none" : known))")
        }
        return names
    }
}

/// `filters.NAME.engine`.
private enum FilterEngineName: String, CaseIterable {
    case interpreter, compiled
}
