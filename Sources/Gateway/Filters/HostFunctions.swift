import Glibc
import Logging
import Rewriter

/// The functions gatewayd provides to a filter, by import name: the
/// Proxy-Wasm ABI (v0.2.1, v0.2.0 and v0.1.0's extra names) and the WASI
/// preview1 calls the SDKs' runtimes make. Each returns the ABI status
/// (WASI: its errno); one a module imports that is not here fails `check`.
extension FilterVM {
    /// A function in a struct: a closure stored in a dictionary as a bare
    /// function value is called through two reabstraction thunks.
    struct HostFunction: Sendable {
        let run: @Sendable (FilterVM, Arguments) throws -> Int32

        func callAsFunction(_ vm: FilterVM, _ arguments: Arguments) throws -> Int32 { try run(vm, arguments) }
    }

    static func hostFunction(module: String, name: String) -> HostFunction? {
        switch module {
        case "env": proxyFunctions[name]
        case "wasi_snapshot_preview1", "wasi_unstable": wasiFunctions[name]
        default: nil
        }
    }

    /// What an engine binds `module.name` to; a module's import gatewayd lacks fails its VM.
    static func hostFunction(module: String, name: String, for filter: FilterConfig) throws(FilterFailure) -> HostFunction {
        guard let host = hostFunction(module: module, name: name) else {
            throw FilterFailure(filter.name, "imports \(module).\(name), which gatewayd does not provide")
        }
        return host
    }

    private static func status(_ status: ProxyWasm.Status) -> Int32 { status.rawValue }

    static let proxyFunctions: [String: HostFunction] = [
        // Logging
        "proxy_log": .init { vm, a in
            guard let message = vm.memory?.readString(a[1], count: a[2]) else { return status(.invalidMemoryAccess) }
            vm.log(level: a[0], message)
            return status(.ok)
        },
        "proxy_get_log_level": .init { vm, a in
            vm.memory?.write(vm.logLevel, at: a[0]) == true ? status(.ok) : status(.invalidMemoryAccess)
        },
        // Clocks, timers
        "proxy_get_current_time_nanoseconds": .init { vm, a in
            vm.memory?.write(FilterVM.wallClockNanos(), at: a[0]) == true ? status(.ok) : status(.invalidMemoryAccess)
        },
        "proxy_set_tick_period_milliseconds": .init { vm, a in
            vm.setTick(period: a[0])
            return status(.ok)
        },
        // Context lifecycle
        "proxy_set_effective_context": .init { vm, a in
            guard a[0] == vm.rootContext || vm.exchanges[a[0]] != nil else { return status(.badArgument) }
            vm.act(for: a[0])
            return status(.ok)
        },
        "proxy_done": .init { _, _ in status(.notFound) },
        // Buffers
        "proxy_get_buffer_bytes": .init { vm, a in
            guard let type = ProxyWasm.BufferType(rawValue: a[0]) else { return status(.badArgument) }
            guard let buffer = vm.buffer(type) else { return status(.notFound) }
            let start = Int(a[1]), size = Int(a[2])
            guard start <= buffer.count else { return status(.badArgument) }
            let end = min(buffer.count, start + size)
            return try vm.hand(Array(buffer[start..<end]), addressAt: a[3], sizeAt: a[4]).rawValue
        },
        "proxy_get_buffer_status": .init { vm, a in
            guard let type = ProxyWasm.BufferType(rawValue: a[0]) else { return status(.badArgument) }
            guard let buffer = vm.buffer(type) else { return status(.notFound) }
            guard vm.memory?.write(UInt32(buffer.count), at: a[1]) == true, vm.memory?.write(UInt32(0), at: a[2]) == true else {
                return status(.invalidMemoryAccess)
            }
            return status(.ok)
        },
        "proxy_set_buffer_bytes": .init { vm, a in
            guard let type = ProxyWasm.BufferType(rawValue: a[0]) else { return status(.badArgument) }
            guard let value = vm.memory?.read(a[3], count: a[4]) else { return status(.invalidMemoryAccess) }
            return vm.setBuffer(type, start: Int(a[1]), size: Int(a[2]), value).rawValue
        },
        // HTTP fields
        "proxy_get_header_map_size": .init { vm, a in
            guard let map = vm.map(a[0]) else { return status(.badArgument) }
            return vm.memory?.write(UInt32(map.serialized.count), at: a[1]) == true ? status(.ok) : status(.invalidMemoryAccess)
        },
        "proxy_get_header_map_pairs": .init { vm, a in
            guard let map = vm.map(a[0]) else { return status(.badArgument) }
            return try vm.hand(map.serialized, addressAt: a[1], sizeAt: a[2]).rawValue
        },
        "proxy_set_header_map_pairs": .init { vm, a in
            guard let bytes = vm.memory?.read(a[1], count: a[2]) else { return status(.invalidMemoryAccess) }
            guard let pairs = ProxyWasm.deserialize(bytes) else { return status(.parseFailure) }
            guard pairs.allSatisfy(FilterVM.isWritable) else { return status(.badArgument) }
            return vm.editMap(a[0], .replaceAll(pairs)).rawValue
        },
        "proxy_get_header_map_value": .init { vm, a in
            guard let map = vm.map(a[0]) else { return status(.badArgument) }
            guard let found = vm.memory?.read(a[1], count: a[2], { map.value(named: $0) }) else { return status(.invalidMemoryAccess) }
            guard let value = found else { return status(.notFound) }
            return try vm.hand(value, addressAt: a[3], sizeAt: a[4]).rawValue
        },
        "proxy_add_header_map_value": .init { vm, a in
            guard let key = vm.memory?.readString(a[1], count: a[2]), let value = vm.memory?.readString(a[3], count: a[4]) else {
                return status(.invalidMemoryAccess)
            }
            guard FilterVM.isWritable((key, value)) else { return status(.badArgument) }
            return vm.editMap(a[0], .add(name: key, value: value)).rawValue
        },
        "proxy_replace_header_map_value": .init { vm, a in
            guard let key = vm.memory?.readString(a[1], count: a[2]), let value = vm.memory?.readString(a[3], count: a[4]) else {
                return status(.invalidMemoryAccess)
            }
            guard FilterVM.isWritable((key, value)) else { return status(.badArgument) }
            return vm.editMap(a[0], .replace(name: key, value: value)).rawValue
        },
        "proxy_remove_header_map_value": .init { vm, a in
            guard let key = vm.memory?.readString(a[1], count: a[2]) else { return status(.invalidMemoryAccess) }
            return vm.editMap(a[0], .remove(name: key)).rawValue
        },
        // Streams
        "proxy_continue_stream": .init { vm, a in
            guard let type = ProxyWasm.StreamType(rawValue: a[0]), type == .request || type == .response else {
                return status(.unimplemented)
            }
            guard let exchange = vm.exchange else { return status(.notFound) }
            exchange.pending = .continue(type)
            return status(.ok)
        },
        "proxy_continue_request": .init { vm, _ in
            vm.exchange?.pending = .continue(.request)
            return status(.ok)
        },
        "proxy_continue_response": .init { vm, _ in
            vm.exchange?.pending = .continue(.response)
            return status(.ok)
        },
        "proxy_close_stream": .init { vm, _ in
            guard let exchange = vm.exchange else { return status(.notFound) }
            exchange.pending = .close
            return status(.ok)
        },
        "proxy_send_local_response": .init { vm, a in
            guard let memory = vm.memory, let details = memory.readString(a[1], count: a[2]), let body = memory.read(a[3], count: a[4]),
                let headerBytes = memory.read(a[5], count: a[6])
            else { return status(.invalidMemoryAccess) }
            guard let headers = ProxyWasm.deserialize(headerBytes) else { return status(.parseFailure) }
            guard (200...599).contains(a[0]), headers.allSatisfy(FilterVM.isWritable) else { return status(.badArgument) }
            guard let exchange = vm.exchange else { return status(.notFound) }
            exchange.localResponse = .init(status: Int(a[0]), details: details, body: body, headers: headers, filter: vm.filter.name)
            return status(.ok)
        },
        "proxy_get_status": .init { vm, a in
            guard let code = vm.lastCallStatus else { return status(.notFound) }
            guard vm.memory?.write(code, at: a[0]) == true else { return status(.invalidMemoryAccess) }
            return try vm.hand([], addressAt: a[1], sizeAt: a[2]).rawValue
        },
        // HTTP calls
        "proxy_http_call": .init { vm, a in
            guard let memory = vm.memory, let upstream = memory.readString(a[0], count: a[1]), let headerBytes = memory.read(a[2], count: a[3]),
                let body = memory.read(a[4], count: a[5])
            else { return status(.invalidMemoryAccess) }
            guard let headers = ProxyWasm.deserialize(headerBytes) else { return status(.parseFailure) }
            // Checked as edits to the request map are: nothing a filter wrote reaches a wire unvalidated.
            guard headers.allSatisfy(FilterVM.isWritable) else { return status(.badArgument) }
            return vm.httpCall(FilterHTTPCall(upstream: upstream, headers: headers, body: body, timeout: .milliseconds(Int64(a[8]))),
                               idAt: a[9]).rawValue
        },
        // Shared data and queues
        "proxy_get_shared_data": .init { vm, a in
            guard let key = vm.memory?.readString(a[0], count: a[1]) else { return status(.invalidMemoryAccess) }
            guard let (value, cas) = vm.services.shared.get(key) else { return status(.notFound) }
            guard vm.memory?.write(cas, at: a[4]) == true else { return status(.invalidMemoryAccess) }
            return try vm.hand(value, addressAt: a[2], sizeAt: a[3]).rawValue
        },
        "proxy_set_shared_data": .init { vm, a in
            guard let key = vm.memory?.readString(a[0], count: a[1]), let value = vm.memory?.read(a[2], count: a[3]) else {
                return status(.invalidMemoryAccess)
            }
            return vm.services.shared.set(key, value, cas: a[4]).rawValue
        },
        "proxy_register_shared_queue": .init { vm, a in
            guard let name = vm.memory?.readString(a[0], count: a[1]) else { return status(.invalidMemoryAccess) }
            let id = vm.services.shared.registerQueue(vm.filter.name + "\u{0}" + name)
            return vm.memory?.write(id, at: a[2]) == true ? status(.ok) : status(.invalidMemoryAccess)
        },
        "proxy_resolve_shared_queue": .init { vm, a in
            guard let vmID = vm.memory?.readString(a[0], count: a[1]), let name = vm.memory?.readString(a[2], count: a[3]) else {
                return status(.invalidMemoryAccess)
            }
            // A queue is named by the filter (its VM id) that registered it; an empty id is the caller's own.
            guard let id = vm.services.shared.resolveQueue((vmID.isEmpty ? vm.filter.name : vmID) + "\u{0}" + name) else {
                return status(.notFound)
            }
            return vm.memory?.write(id, at: a[4]) == true ? status(.ok) : status(.invalidMemoryAccess)
        },
        "proxy_enqueue_shared_queue": .init { vm, a in
            guard let value = vm.memory?.read(a[1], count: a[2]) else { return status(.invalidMemoryAccess) }
            return vm.services.shared.enqueue(a[0], value).rawValue
        },
        "proxy_dequeue_shared_queue": .init { vm, a in
            let (value, result) = vm.services.shared.dequeue(a[0])
            guard let value else { return result.rawValue }
            return try vm.hand(value, addressAt: a[1], sizeAt: a[2]).rawValue
        },
        // Metrics
        "proxy_define_metric": .init { vm, a in
            guard let type = ProxyWasm.MetricType(rawValue: a[0]) else { return status(.badArgument) }
            guard let name = vm.memory?.readString(a[1], count: a[2]) else { return status(.invalidMemoryAccess) }
            let id = vm.services.shared.defineMetric(type, name: name, filter: vm.filter.name)
            return vm.memory?.write(id, at: a[3]) == true ? status(.ok) : status(.invalidMemoryAccess)
        },
        "proxy_increment_metric": .init { vm, a in vm.services.shared.recordMetric(a[0], delta: Int64(bitPattern: a.wide(1))).rawValue },
        "proxy_record_metric": .init { vm, a in vm.services.shared.recordMetric(a[0], value: Int64(bitPattern: a.wide(1))).rawValue },
        "proxy_get_metric": .init { vm, a in
            guard let value = vm.services.shared.metricValue(a[0]) else { return status(.notFound) }
            return vm.memory?.write(UInt64(bitPattern: value), at: a[1]) == true ? status(.ok) : status(.invalidMemoryAccess)
        },
        // Properties
        "proxy_get_property": .init { vm, a in
            guard let path = vm.memory?.read(a[0], count: a[1]) else { return status(.invalidMemoryAccess) }
            guard let value = vm.property(path) else { return status(.notFound) }
            return try vm.hand(value, addressAt: a[2], sizeAt: a[3]).rawValue
        },
        "proxy_set_property": .init { vm, a in
            guard let path = vm.memory?.read(a[0], count: a[1]), let value = vm.memory?.read(a[2], count: a[3]) else {
                return status(.invalidMemoryAccess)
            }
            guard let exchange = vm.exchange else { return status(.notFound) }
            exchange.setProperties[FilterVM.propertyKey(path)] = value
            return status(.ok)
        },
        // v0.1.0: the configuration of the callback running (VM or plugin).
        "proxy_get_configuration": .init { vm, a in
            let configuration = vm.callbackBuffers[.pluginConfiguration] ?? vm.callbackBuffers[.vmConfiguration] ?? []
            return try vm.hand(configuration, addressAt: a[0], sizeAt: a[1]).rawValue
        },
        // gRPC and foreign functions: refused with the spec's status.
        "proxy_grpc_call": .init { _, _ in status(.unimplemented) },
        "proxy_grpc_stream": .init { _, _ in status(.unimplemented) },
        "proxy_grpc_send": .init { _, _ in status(.unimplemented) },
        "proxy_grpc_cancel": .init { _, _ in status(.notFound) },
        "proxy_grpc_close": .init { _, _ in status(.notFound) },
        "proxy_call_foreign_function": .init { _, _ in status(.notFound) },
    ]
}

extension FilterVM {
    /// The guest's log level: what the operational log lets through.
    var logLevel: UInt32 {
        switch services.logger.logLevel {
        case .trace: 0
        case .debug: 1
        case .info, .notice: 2
        case .warning: 3
        case .error: 4
        case .critical: 5
        }
    }

    func log(level: UInt32, _ message: String) {
        let levels: [Logger.Level] = [.trace, .debug, .info, .warning, .error, .critical]
        let level = levels[Int(min(level, 5))]
        services.logger.log(level: level, "\(message)", metadata: ["filter": .string(filter.name)])
    }

    static func wallClockNanos() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }

    func buffer(_ type: ProxyWasm.BufferType) -> [UInt8]? {
        if let buffer = callbackBuffers[type] { return buffer }
        switch type {
        case .requestBody: return exchange?.requestBody
        case .responseBody: return exchange?.responseBody
        case .pluginConfiguration: return filter.configuration
        case .vmConfiguration: return []
        default: return nil
        }
    }

    /// Replaces `size` bytes from `start` of a body with `value` (Envoy's reading: start 0 and a size of at least the body's replaces it).
    func setBuffer(_ type: ProxyWasm.BufferType, start: Int, size: Int, _ value: [UInt8]) -> ProxyWasm.Status {
        guard let exchange else { return .notFound }
        func edit(_ body: inout [UInt8]) -> ProxyWasm.Status {
            guard start <= body.count else { return .badArgument }
            let end = min(body.count, start + size)
            body.replaceSubrange(start..<end, with: value)
            return .ok
        }
        switch type {
        case .requestBody:
            exchange.requestBodyEdited = true
            return edit(&exchange.requestBody)
        case .responseBody: return edit(&exchange.responseBody)
        default: return .badArgument
        }
    }

    func map(_ map: UInt32) -> FieldMap? {
        guard let type = ProxyWasm.MapType(rawValue: map) else { return nil }
        if type == .httpCallResponseHeaders { return httpCallResponse.map { .fields($0.headers) } }
        if type == .httpCallResponseTrailers { return httpCallResponse.map { .fields($0.trailers) } }
        return exchange?.map(type)
    }

    /// Whether a field a filter writes can go on the wire as it is: a field
    /// name and value (an Envoy pseudo-field's value for `:path` a target,
    /// for `:method` a token). Checked when written, so the request and
    /// response need no pass over every field afterwards.
    static func isWritable(_ field: (name: String, value: String)) -> Bool {
        guard field.name.utf8.first == UInt8(ascii: ":") else { return HeaderList.isValidName(field.name) && HeaderList.isValidValue(field.value) }
        return switch field.name {
        case ":path": field.value.utf8.first == UInt8(ascii: "/") && field.value.utf8.allSatisfy { $0 > 0x20 && $0 != 0x7F }
        case ":method": HeaderList.isValidName(field.value)
        case ":authority", ":scheme", ":status": HeaderList.isValidValue(field.value) && !field.value.isEmpty
        default: false
        }
    }

    func editMap(_ map: UInt32, _ edit: FieldEdit) -> ProxyWasm.Status {
        guard let type = ProxyWasm.MapType(rawValue: map), let exchange else { return .badArgument }
        return exchange.edit(type, edit) ? .ok : .badArgument
    }
}
