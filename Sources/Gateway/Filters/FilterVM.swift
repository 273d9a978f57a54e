@_spi(Fuzzing) import WasmKit

/// One filter's module instantiated on its engine (`FilterEngine`): its
/// own linear memory, its root context configured, and the HTTP contexts of
/// the calls it serves. One per filter per event loop (as Envoy has one per
/// worker): used only on its loop, with no lock. A trap, an exhausted fuel
/// budget or the memory cap reached breaks the VM, which is dropped and
/// built anew for the next call.
final class FilterVM {
    let filter: FilterConfig
    let services: FilterServices
    private var engine: (any FilterEngine)?
    private(set) var memory: GuestMemory?
    private var exported = 0
    /// The root (plugin) context's id; HTTP contexts count up from it.
    let rootContext: UInt32 = 1
    private var lastContext: UInt32 = 1
    /// The context the guest acts for (`proxy_set_effective_context`).
    private(set) var effectiveContext: UInt32 = 1
    /// Each live HTTP context's call.
    private(set) var exchanges: [UInt32: FilterExchange] = [:]
    /// The call the guest acts for now: kept, as each host call reads it.
    private(set) var exchange: FilterExchange?
    /// What the callback running now may read: `PLUGIN_CONFIGURATION` while configuring, an HTTP call's answer while it is delivered.
    var callbackBuffers: [ProxyWasm.BufferType: [UInt8]] = [:]
    var httpCallResponse: (headers: [(name: String, value: String)], trailers: [(name: String, value: String)])?
    /// Set when a callback failed: the VM is not used again.
    private(set) var broken: String?
    var tickPeriod: Duration?
    /// HTTP calls in flight: the context each was made for, by call id.
    var httpCalls: [UInt32: UInt32] = [:]
    var lastHTTPCall: UInt32 = 0
    /// The status of the last HTTP call answered (`proxy_get_status`).
    var lastCallStatus: UInt32?

    private init(filter: FilterConfig, services: FilterServices) {
        self.filter = filter
        self.services = services
    }

    /// The module instantiated and started, its root context configured
    /// (`proxy_on_vm_start`, then `proxy_on_configure` with the plugin
    /// configuration): both must say true.
    static func start(_ filter: FilterConfig, services: FilterServices) throws(FilterFailure) -> FilterVM {
        let vm = FilterVM(filter: filter, services: services)
        try vm.instantiate()
        return vm
    }

    private func instantiate() throws(FilterFailure) {
        let engine: any FilterEngine = switch filter.engine {
        case .interpreter: try InterpretedEngine(self)
        case .compiled(let library): try CompiledEngine(self, library: library)
        }
        self.engine = engine
        memory = engine.memory
        exported = Callback.allCases.reduce(0) { engine.exports($1) ? $0 | 1 << $1.rawValue : $0 }
        // A reactor (`_initialize`, then `main` if any) or a command (`_start`).
        if exports(.initialize) {
            try call(.initialize, [])
            if filter.module.hasMain { try call(.main, [0, 0]) }
        } else if exports(.start) {
            try call(.start, [])
        }
        try call(.contextCreate, [rootContext, 0])
        callbackBuffers[.vmConfiguration] = []
        if try call(.vmStart, [rootContext, 0]) == 0 { throw FilterFailure(filter.name, "proxy_on_vm_start returned false") }
        callbackBuffers = [.pluginConfiguration: filter.configuration]
        defer { callbackBuffers = [:] }
        if try call(.configure, [rootContext, UInt32(clamping: filter.configuration.count)]) == 0 {
            throw FilterFailure(filter.name, "proxy_on_configure returned false")
        }
    }

    /// The callbacks the host calls, by their export names.
    enum Callback: Int, CaseIterable {
        case initialize, main, start, contextCreate, vmStart, configure, requestHeaders, requestBody, responseHeaders, responseBody, done, log,
            delete, tick, httpCallResponse

        var name: String {
            switch self {
            case .initialize: "_initialize"
            case .main: "main"
            case .start: "_start"
            case .contextCreate: "proxy_on_context_create"
            case .vmStart: "proxy_on_vm_start"
            case .configure: "proxy_on_configure"
            case .requestHeaders: "proxy_on_request_headers"
            case .requestBody: "proxy_on_request_body"
            case .responseHeaders: "proxy_on_response_headers"
            case .responseBody: "proxy_on_response_body"
            case .done: "proxy_on_done"
            case .log: "proxy_on_log"
            case .delete: "proxy_on_delete"
            case .tick: "proxy_on_tick"
            case .httpCallResponse: "proxy_on_http_call_response"
            }
        }
    }

    /// Whether the module exports a callback.
    /// Read from a mask made once: asked for each callback of each call.
    func exports(_ callback: Callback) -> Bool { exported & 1 << callback.rawValue != 0 }

    /// Runs `callback` (nil: not exported); a failure breaks the VM.
    @discardableResult
    func call(_ callback: Callback, _ arguments: CallbackArguments) throws(FilterFailure) -> UInt32? {
        if let broken { throw FilterFailure(filter.name, broken) }
        do {
            return try engine?.call(callback, arguments)
        } catch {
            let reason = FilterFailure.describe(error)
            broken = reason
            throw FilterFailure(filter.name, reason)
        }
    }

    /// `size` bytes of the guest's memory from its allocator (0 when it failed).
    /// The allocator is the one way a host call re-enters the guest; an
    /// allocator that asks the host for bytes in turn would recurse on the
    /// native stack without bound, so that nesting is a trap: host→guest
    /// nesting is at most one level deep by construction.
    func allocate(_ size: Int) throws -> UInt32 {
        guard let engine, let size = UInt32(exactly: size) else { return 0 }
        guard !allocating else { throw ReentrantAllocator() }
        allocating = true
        defer { allocating = false }
        return try engine.allocate(size)
    }

    private var allocating = false

    struct ReentrantAllocator: Error, CustomStringConvertible {
        var description: String { "the allocator asked the host for bytes (re-entrant allocation)" }
    }

    /// Hands `bytes` to the guest: copied into memory from its allocator, the
    /// address and size written where it asked. Fails with the ABI's status.
    func hand(_ bytes: [UInt8], addressAt: UInt32, sizeAt: UInt32) throws -> ProxyWasm.Status {
        try bytes.withUnsafeBytes { try hand($0, addressAt: addressAt, sizeAt: sizeAt) }
    }

    /// A field's value, handed from the string's own bytes (no array made for them).
    func hand(_ text: String, addressAt: UInt32, sizeAt: UInt32) throws -> ProxyWasm.Status {
        var text = text
        return try text.withUTF8 { try hand(UnsafeRawBufferPointer($0), addressAt: addressAt, sizeAt: sizeAt) }
    }

    private func hand(_ bytes: UnsafeRawBufferPointer, addressAt: UInt32, sizeAt: UInt32) throws -> ProxyWasm.Status {
        guard let memory else { return .internalFailure }
        // An empty value still gets a valid (never read) address.
        let address = try allocate(max(bytes.count, 1))
        guard address != 0 else { return .internalFailure }
        guard memory.write(bytes, at: address), memory.write(address, at: addressAt), memory.write(UInt32(bytes.count), at: sizeAt) else {
            return .invalidMemoryAccess
        }
        return .ok
    }

    /// The guest acts for `context` (its call looked up).
    func act(for context: UInt32) { act(for: context, exchanges[context]) }

    /// The guest acts for `context`, whose call the caller knows.
    func act(for context: UInt32, _ exchange: FilterExchange?) {
        effectiveContext = context
        self.exchange = exchange
    }

    /// A new HTTP context for a call (`proxy_on_context_create`).
    func open(_ exchange: FilterExchange) throws(FilterFailure) -> UInt32 {
        lastContext &+= 1
        if lastContext <= rootContext { lastContext = rootContext + 1 }
        exchanges[lastContext] = exchange
        try call(.contextCreate, [lastContext, rootContext])
        return lastContext
    }

    /// `exchange`'s call is over: `proxy_on_done`, `proxy_on_log`, `proxy_on_delete`.
    func close(_ context: UInt32, _ closing: FilterExchange) {
        if broken == nil {
            act(for: context, closing)
            if exports(.done) { _ = try? call(.done, [context]) }
            if exports(.log) { _ = try? call(.log, [context]) }
            if exports(.delete) { _ = try? call(.delete, [context]) }
        }
        exchanges[context] = nil
        if exchange === closing { exchange = nil }
    }
}

/// Why a filter failed: its name and the reason, for the access line and the log.
struct FilterFailure: Error, CustomStringConvertible {
    let filter: String
    let reason: String

    init(_ filter: String, _ reason: String) {
        self.filter = filter
        self.reason = reason
    }

    var description: String { "filter \(filter): \(reason)" }

    static func describe(_ error: any Error) -> String {
        switch error {
        case let cap as MemoryCap.Reached: return "max_memory reached (\(cap.bytes) bytes asked)"
        case let exit as FilterExit: return "proc_exit(\(exit.code))"
        case let reentry as FilterVM.ReentrantAllocator: return reentry.description
        default:
            let text = "\(error)".split(separator: "\n").first.map(String.init) ?? "\(error)"
            return text.contains("out of fuel") || text.contains("fuel") ? "fuel exhausted" : text
        }
    }
}

/// A guest called WASI's `proc_exit`: its VM is done.
struct FilterExit: Error {
    let code: UInt32
}

/// The filter's `max_memory`: growing its memory past it traps.
final class MemoryCap: ResourceLimiter {
    struct Reached: Error {
        let bytes: Int
    }

    let bytes: Int

    init(bytes: Int) { self.bytes = bytes }

    func limitMemoryGrowth(to desired: Int) throws -> Bool {
        guard desired <= bytes else { throw Reached(bytes: desired) }
        return true
    }

    func limitTableGrowth(to desired: Int) throws -> Bool { desired <= 1_000_000 }
}

/// A callback's arguments, held inline (a callback allocates nothing for them).
struct CallbackArguments: ExpressibleByArrayLiteral {
    private var values = InlineArray<5, UInt32>(repeating: 0)
    private(set) var count = 0

    init(arrayLiteral elements: UInt32...) {
        for value in elements.prefix(5) {
            values[count] = value
            count += 1
        }
    }

    subscript(_ index: Int) -> UInt32 { index < count ? values[index] : 0 }
}

/// A host function's arguments as unsigned 32-bit values (an i64 is read
/// in full where one is expected), held inline: a host call allocates nothing
/// for them.
struct Arguments {
    private var values = InlineArray<12, UInt64>(repeating: 0)
    private var count = 0

    init(_ values: UnsafeBufferPointer<Value>) {
        for value in values.prefix(12) { append(value) }
    }

    /// A compiled filter's: each argument widened to 64 bits by its glue.
    init(_ values: UnsafeBufferPointer<UInt64>) {
        for value in values.prefix(12) {
            self.values[count] = value
            count += 1
        }
    }

    init(_ values: [Value]) {
        for value in values.prefix(12) { append(value) }
    }

    private mutating func append(_ value: Value) {
        switch value {
        case .i32(let v): values[count] = UInt64(v)
        case .i64(let v): values[count] = v
        default: values[count] = 0
        }
        count += 1
    }

    subscript(_ index: Int) -> UInt32 { index < count ? UInt32(truncatingIfNeeded: values[index]) : 0 }

    func wide(_ index: Int) -> UInt64 { index < count ? values[index] : 0 }
}
