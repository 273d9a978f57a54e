import CoreMetrics
import Logging
import NIOConcurrencyHelpers
import Testing
import WAT
import WasmKit
@testable import Gateway

/// Each host function against a live VM, without sockets: what it reads
/// from and writes into the filter's memory, and the ABI status it answers
/// (hostile pointers and lengths included).
@Suite(.ownThreads) struct FilterHostTests {
    /// Log lines the filters wrote, with their level and filter.
    final class Lines: LogHandler, @unchecked Sendable {
        let lines = NIOLockedValueBox<[(Logger.Level, String, String)]>([])
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            lines.withLockedValue { $0.append((event.level, "\(event.message)", event.metadata?["filter"].map { "\($0)" } ?? "")) }
        }
    }

    let lines = Lines()
    let shared = FilterSharedState(factory: NOOPMetricsHandler.instance)

    /// `engine`: the suite's tests run on both, but for the memory cap, which each engine meets its own way.
    func vm(_ wat: String = WasmFilter.wat(""), configuration: String = "cfg", maxMemory: Int = 1 << 20,
            environment: [(name: String, value: String)] = [], ticks: NIOLockedValueBox<[Duration]>? = nil,
            engine: FilterTests.Engine = .interpreter,
            httpCall: ((FilterHTTPCall, @escaping (Result<OwnCall.Contents, any Error>) -> Void) -> Bool)? = nil) throws -> FilterVM {
        let bytes = try wat2wasm(wat)
        var filter = FilterConfig(name: "t", wasm: "t.wasm", configuration: Array(configuration.utf8), rootID: "root-1", failOpen: false,
                                  fuel: 1_000_000, maxMemory: maxMemory, environment: environment, module: try FilterModule(bytes: bytes))
        if engine == .compiled { filter.engine = .compiled(library: try FilterCompiler.library(for: bytes)) }
        let lines = lines
        var services = FilterServices(logger: Logger(label: "filters") { _ in lines }, shared: shared)
        services.httpCall = httpCall
        if let ticks { services.scheduleTick = { _, period in ticks.withLockedValue { $0.append(period) } } }
        return try FilterVM.start(filter, services: services)
    }

    static let info = FixedCallInfo(route: "orders", upstream: "app", requestID: "req-1", clientAddress: "192.0.2.1",
                                     localAddress: "127.0.0.1:8080", scheme: "http", proto: "HTTP/1.1", startNanos: 42)

    /// A call on `vm` acting as the effective context.
    func call(_ vm: FilterVM, body: String = "hello") throws -> FilterExchange {
        var request = UpstreamRequest(method: "GET", target: "/a?b=1", headers: ["Host": "app", "X-Key": "v1"], body: Array(body.utf8))
        let exchange = FilterExchange(taking: &request, info: Self.info)
        vm.act(for: try vm.open(exchange), exchange)
        return exchange
    }

    func host(_ vm: FilterVM, _ name: String, _ arguments: UInt32..., module: String = "env") throws -> Int32 {
        let function = try #require(FilterVM.hostFunction(module: module, name: name))
        return try function(vm, Arguments(arguments.map { .i32($0) }))
    }

    func put(_ vm: FilterVM, _ text: String, at address: UInt32) -> UInt32 {
        _ = vm.memory!.write(Array(text.utf8), at: address)
        return UInt32(text.utf8.count)
    }

    /// What a host function handed over: the bytes at the address it wrote at `at`, of the size it wrote at `at + 4`.
    func handed(_ vm: FilterVM, at address: UInt32 = 1000) -> [UInt8] {
        let memory = vm.memory!
        return memory.read(memory.readUInt32(address)!, count: memory.readUInt32(address + 4)!) ?? []
    }

    func text(_ vm: FilterVM, at address: UInt32 = 1000) -> String { String(decoding: handed(vm, at: address), as: UTF8.self) }

    static let ok: Int32 = 0, notFound: Int32 = 1, badArgument: Int32 = 2, parseFailure: Int32 = 4, invalidMemory: Int32 = 6, empty: Int32 = 7,
        casMismatch: Int32 = 8, unimplemented: Int32 = 12

    @Test(arguments: FilterTests.Engine.allCases) func headerMapsAreReadAndEditedCaseInsensitively(_ engine: FilterTests.Engine) throws {
        let vm = try vm(engine: engine)
        let exchange = try call(vm)
        #expect(try host(vm, "proxy_get_header_map_pairs", 0, 1000, 1004) == Self.ok)
        let pairs = try #require(ProxyWasm.deserialize(handed(vm)))
        #expect(pairs.map(\.name) == [":method", ":path", ":authority", ":scheme", "Host", "X-Key"])
        #expect(pairs.map(\.value) == ["GET", "/a?b=1", "app", "http", "app", "v1"])
        #expect(try host(vm, "proxy_get_header_map_size", 0, 1100) == Self.ok && vm.memory!.readUInt32(1100) == UInt32(ProxyWasm.serialize(pairs).count))
        let key = put(vm, "x-key", at: 2000)
        #expect(try host(vm, "proxy_get_header_map_value", 0, 2000, key, 1000, 1004) == Self.ok && text(vm) == "v1")
        let value = put(vm, "v2", at: 2100)
        #expect(try host(vm, "proxy_replace_header_map_value", 0, 2000, key, 2100, value) == Self.ok)
        let added = put(vm, "x-new", at: 2200)
        #expect(try host(vm, "proxy_add_header_map_value", 0, 2200, added, 2100, value) == Self.ok)
        // Edits reach the request itself: a pseudo-field is its method, target, Host or scheme.
        let path = put(vm, ":path", at: 2300), newPath = put(vm, "/b", at: 2400)
        #expect(try host(vm, "proxy_replace_header_map_value", 0, 2300, path, 2400, newPath) == Self.ok)
        let authority = put(vm, ":authority", at: 2500), newHost = put(vm, "other", at: 2600)
        #expect(try host(vm, "proxy_add_header_map_value", 0, 2500, authority, 2600, newHost) == Self.ok)
        // The request cannot lose a pseudo-field, nor take a framing field from a filter.
        #expect(try host(vm, "proxy_remove_header_map_value", 0, 2300, path) == Self.badArgument)
        let length = put(vm, "content-length", at: 2700), digits = put(vm, "99", at: 2800)
        #expect(try host(vm, "proxy_add_header_map_value", 0, 2700, length, 2800, digits) == Self.ok)
        var request = UpstreamRequest(method: "", target: "", headers: [:], body: nil)
        exchange.handBack(to: &request, streams: false)
        #expect(request.target == "/b" && request.method == "GET")
        #expect(request.headers.map(\.name) == ["Host", "x-key", "x-new"] && request.headers.map(\.value) == ["other", "v2", "v2"])
        #expect(request.framing == .length(5))
        // A whole map set (a pseudo-field it leaves out, and Host, keep their values); a malformed one refused; unknown maps and
        // pointers past the end answered, not crashed on.
        let map = ProxyWasm.serialize([(":method", "PUT"), ("a", "1"), ("b", "22")])
        _ = vm.memory!.write(map, at: 3000)
        #expect(try host(vm, "proxy_set_header_map_pairs", 0, 3000, UInt32(map.count)) == Self.ok)
        #expect(exchange.request.method == "PUT" && exchange.request.target == "/b" && exchange.request.headers.map(\.name) == ["a", "b", "Host"])
        #expect(try host(vm, "proxy_set_header_map_pairs", 0, 3000, UInt32(map.count - 1)) == Self.parseFailure)
        let unknown = ProxyWasm.serialize([(":status", "200")])
        _ = vm.memory!.write(unknown, at: 3200)
        #expect(try host(vm, "proxy_set_header_map_pairs", 0, 3200, UInt32(unknown.count)) == Self.badArgument)
        #expect(try host(vm, "proxy_get_header_map_pairs", 9, 1000, 1004) == Self.badArgument)
        let end = UInt32(vm.memory!.byteCount)
        #expect(try host(vm, "proxy_get_header_map_value", 0, end - 2, 5, 1000, 1004) == Self.invalidMemory)
        #expect(try host(vm, "proxy_get_header_map_pairs", 0, end - 2, 1004) == Self.invalidMemory)
        #expect(try host(vm, "proxy_add_header_map_value", 0, 0xFFFF_FFF0, 0xFFFF, 2100, value) == Self.invalidMemory)
        // A field that could not be written as HTTP is refused when written (no request smuggled through a filter).
        let split = put(vm, "a\r\nX-Evil: 1", at: 4000)
        #expect(try host(vm, "proxy_add_header_map_value", 0, 2200, added, 4000, split) == Self.badArgument)
        let badPath = put(vm, "/a b", at: 4100)
        #expect(try host(vm, "proxy_replace_header_map_value", 0, 2300, path, 4100, badPath) == Self.badArgument)
        #expect(exchange.request.target == "/b" && exchange.request.headers.map(\.name) == ["a", "b", "Host"])
    }

    @Test(arguments: FilterTests.Engine.allCases) func buffersAreSlicedReplacedAndMeasured(_ engine: FilterTests.Engine) throws {
        let vm = try vm(configuration: "{\"k\":1}", engine: engine)
        let exchange = try call(vm, body: "hello world")
        #expect(try host(vm, "proxy_get_buffer_bytes", 0, 6, 100, 1000, 1004) == Self.ok && text(vm) == "world")
        #expect(try host(vm, "proxy_get_buffer_bytes", 0, 0, 5, 1000, 1004) == Self.ok && text(vm) == "hello")
        #expect(try host(vm, "proxy_get_buffer_bytes", 0, 12, 5, 1000, 1004) == Self.badArgument)
        #expect(try host(vm, "proxy_get_buffer_bytes", 7, 0, 100, 1000, 1004) == Self.ok && text(vm) == "{\"k\":1}")
        #expect(try host(vm, "proxy_get_buffer_status", 0, 1100, 1104) == Self.ok && vm.memory!.readUInt32(1100) == 11)
        let new = put(vm, "there", at: 2000)
        #expect(try host(vm, "proxy_set_buffer_bytes", 0, 6, 5, 2000, new) == Self.ok)
        #expect(String(decoding: exchange.requestBody, as: UTF8.self) == "hello there")
        #expect(try host(vm, "proxy_set_buffer_bytes", 0, 0, 0xFFFF_FFFF, 2000, new) == Self.ok)
        #expect(String(decoding: exchange.requestBody, as: UTF8.self) == "there")
        #expect(try host(vm, "proxy_get_buffer_bytes", 4, 0, 1, 1000, 1004) == Self.notFound)
        #expect(try host(vm, "proxy_get_buffer_bytes", 42, 0, 1, 1000, 1004) == Self.badArgument)
    }

    @Test(arguments: FilterTests.Engine.allCases) func propertiesUseEnvoysNames(_ engine: FilterTests.Engine) throws {
        let vm = try vm(engine: engine)
        _ = try call(vm)
        func property(_ path: String) throws -> (Int32, [UInt8]) {
            let size = put(vm, path.replacingOccurrences(of: ".", with: "\u{0}"), at: 2000)
            let status = try host(vm, "proxy_get_property", 2000, size, 1000, 1004)
            return (status, status == Self.ok ? handed(vm) : [])
        }
        for (path, value) in [("request.path", "/a?b=1"), ("request.url_path", "/a"), ("request.method", "GET"), ("request.id", "req-1"),
                              ("route_name", "orders"), ("source.address", "192.0.2.1"), ("plugin_name", "t"), ("plugin_root_id", "root-1"),
                              ("request.protocol", "HTTP/1.1"), ("request.host", "app"), ("request.scheme", "http")] {
            let (status, bytes) = try property(path)
            #expect(status == Self.ok && String(decoding: bytes, as: UTF8.self) == value, "\(path)")
        }
        #expect(try property("request.time").1 == [42, 0, 0, 0, 0, 0, 0, 0])
        #expect(try property("destination.port").1 == [0x90, 0x1F, 0, 0, 0, 0, 0, 0])
        #expect(try ProxyWasm.deserialize(property("request.headers").1)?.map(\.name) == ["Host", "X-Key"])
        #expect(try property("no.such").0 == Self.notFound)
        let path = put(vm, "my\u{0}flag", at: 2000)
        let value = put(vm, "on", at: 2100)
        #expect(try host(vm, "proxy_set_property", 2000, path, 2100, value) == Self.ok)
        #expect(try property("my.flag").1 == Array("on".utf8))
    }

    @Test(arguments: FilterTests.Engine.allCases) func sharedDataComparesAndSetsAndQueuesHandOver(_ engine: FilterTests.Engine) throws {
        let vm = try vm(engine: engine)
        let key = put(vm, "counter", at: 2000)
        let one = put(vm, "1", at: 2100)
        #expect(try host(vm, "proxy_get_shared_data", 2000, key, 1000, 1004, 1008) == Self.notFound)
        #expect(try host(vm, "proxy_set_shared_data", 2000, key, 2100, one, 0) == Self.ok)
        #expect(try host(vm, "proxy_get_shared_data", 2000, key, 1000, 1004, 1008) == Self.ok && text(vm) == "1")
        let cas = vm.memory!.readUInt32(1008)!
        let two = put(vm, "2", at: 2200)
        #expect(try host(vm, "proxy_set_shared_data", 2000, key, 2200, two, cas + 1) == Self.casMismatch)
        #expect(try host(vm, "proxy_set_shared_data", 2000, key, 2200, two, cas) == Self.ok)
        // Another VM (another event loop) sees it.
        let other = try self.vm()
        _ = put(other, "counter", at: 2000)
        #expect(try host(other, "proxy_get_shared_data", 2000, key, 1000, 1004, 1008) == Self.ok && text(other) == "2")
        let name = put(vm, "jobs", at: 2300)
        #expect(try host(vm, "proxy_register_shared_queue", 2300, name, 1100) == Self.ok)
        let queue = vm.memory!.readUInt32(1100)!
        _ = put(other, "jobs", at: 2300)
        #expect(try host(other, "proxy_resolve_shared_queue", 0, 0, 2300, name, 1100) == Self.ok && other.memory!.readUInt32(1100) == queue)
        #expect(try host(vm, "proxy_dequeue_shared_queue", queue, 1000, 1004) == Self.empty)
        _ = put(other, "job-1", at: 2400)
        #expect(try host(other, "proxy_enqueue_shared_queue", queue, 2400, 5) == Self.ok)
        #expect(try host(vm, "proxy_dequeue_shared_queue", queue, 1000, 1004) == Self.ok && text(vm) == "job-1")
        #expect(try host(vm, "proxy_dequeue_shared_queue", 999, 1000, 1004) == Self.notFound)
    }

    @Test(arguments: FilterTests.Engine.allCases) func metricsCountAndRead(_ engine: FilterTests.Engine) throws {
        let vm = try vm(engine: engine)
        let name = put(vm, "hits", at: 2000)
        #expect(try host(vm, "proxy_define_metric", 0, 2000, name, 1100) == Self.ok)
        let counter = vm.memory!.readUInt32(1100)!
        let increment = try #require(FilterVM.hostFunction(module: "env", name: "proxy_increment_metric"))
        #expect(try increment(vm, Arguments([.i32(counter), .i64(5)])) == Self.ok)
        #expect(try increment(vm, Arguments([.i32(counter), .i64(UInt64(bitPattern: -1))])) == Self.badArgument)
        #expect(try host(vm, "proxy_get_metric", counter, 1200) == Self.ok && vm.memory!.read(1200, count: 8) == [5, 0, 0, 0, 0, 0, 0, 0])
        #expect(try host(vm, "proxy_define_metric", 7, 2000, name, 1100) == Self.badArgument)
        #expect(try host(vm, "proxy_get_metric", 999, 1200) == Self.notFound)
    }

    @Test(arguments: FilterTests.Engine.allCases) func logsAndStandardStreamsGoToTheOperationalLogUnderTheFiltersName(_ engine: FilterTests.Engine) throws {
        let vm = try vm(engine: engine)
        let message = put(vm, "hello from the filter", at: 2000)
        #expect(try host(vm, "proxy_log", 3, 2000, message) == Self.ok)
        // fd_write: one iovec {2000, size} at 3000.
        _ = vm.memory!.write(UInt32(2000), at: 3000)
        _ = vm.memory!.write(message, at: 3004)
        #expect(try host(vm, "fd_write", 2, 3000, 1, 3100, module: "wasi_snapshot_preview1") == 0 && vm.memory!.readUInt32(3100) == message)
        #expect(try host(vm, "fd_write", 7, 3000, 1, 3100, module: "wasi_unstable") == 8)
        let logged = lines.lines.withLockedValue { $0 }
        #expect(logged.map(\.0) == [.warning, .error] && logged.allSatisfy { $0.1 == "hello from the filter" && $0.2 == "t" })
        #expect(try host(vm, "proxy_get_log_level", 1200) == Self.ok && vm.memory!.readUInt32(1200) == 0)
    }

    @Test(arguments: FilterTests.Engine.allCases) func wasiGivesClocksRandomnessAndOnlyTheAllowedEnvironment(_ engine: FilterTests.Engine) throws {
        let vm = try vm(environment: [("REGION", "eu-1")], engine: engine)
        let wasi = "wasi_snapshot_preview1"
        #expect(try host(vm, "environ_sizes_get", 1000, 1004, module: wasi) == 0)
        #expect(vm.memory!.readUInt32(1000) == 1 && vm.memory!.readUInt32(1004) == 12)
        #expect(try host(vm, "environ_get", 1100, 1200, module: wasi) == 0 && vm.memory!.readUInt32(1100) == 1200)
        #expect(vm.memory!.read(1200, count: 12) == Array("REGION=eu-1\u{0}".utf8))
        #expect(try host(vm, "args_sizes_get", 1000, 1004, module: wasi) == 0 && vm.memory!.readUInt32(1000) == 0)
        #expect(try host(vm, "clock_time_get", 0, 0, 1300, module: wasi) == 0 && (vm.memory!.read(1300, count: 8)?.contains { $0 != 0 } ?? false))
        #expect(try host(vm, "random_get", 1400, 32, module: wasi) == 0 && Set(vm.memory!.read(1400, count: 32)!).count > 8)
        #expect(try host(vm, "random_get", 0xFFFF_FFF0, 32, module: wasi) == 21)
        #expect(try host(vm, "fd_read", 0, 0, 0, 0, module: wasi) == 8)
        #expect(throws: FilterExit.self) { try host(vm, "proc_exit", 3, module: wasi) }
    }

    @Test(arguments: FilterTests.Engine.allCases) func streamsLocalResponsesAndContextsAnswerWithTheSpecsStatuses(_ engine: FilterTests.Engine) throws {
        let vm = try vm(engine: engine)
        let exchange = try call(vm)
        let details = put(vm, "nope", at: 2000)
        #expect(try host(vm, "proxy_send_local_response", 99, 2000, details, 2000, details, 0, 0, 0) == Self.badArgument)
        #expect(try host(vm, "proxy_send_local_response", 418, 2000, details, 2000, details, 0, 0, 0) == Self.ok)
        #expect(exchange.localResponse?.status == 418 && exchange.localResponse?.body == Array("nope".utf8))
        #expect(try host(vm, "proxy_continue_stream", 0) == Self.ok)
        if case .continue(.request)? = exchange.pending {} else { Issue.record("continue is pending") }
        #expect(try host(vm, "proxy_continue_stream", 2) == Self.unimplemented)
        #expect(try host(vm, "proxy_set_effective_context", 77) == Self.badArgument)
        #expect(try host(vm, "proxy_set_effective_context", vm.rootContext) == Self.ok)
        #expect(try host(vm, "proxy_grpc_call", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0) == Self.unimplemented)
        // Offline (check, explain) no HTTP call is made.
        #expect(try host(vm, "proxy_http_call", 2000, details, 0, 0, 0, 0, 0, 0, 1000, 1100) == Self.unimplemented)
    }

    @Test func theMemoryCapAndProcExitBreakTheVM() throws {
        let grow = WasmFilter.wat("""
            (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
              (drop (memory.grow (i32.const 64))) (i32.const 0))
            (func (export "proxy_on_tick") (param i32)
              (unreachable))
            """)
        let vm = try vm(grow, maxMemory: 1 << 20)
        _ = try call(vm, body: "")
        let context = vm.effectiveContext
        do {
            _ = try vm.call(.requestHeaders, [context, 0, 1])
            Issue.record("the cap is enforced")
        } catch {
            #expect(error.reason.hasPrefix("max_memory reached"))
        }
        #expect(vm.broken != nil)
        // A broken VM runs nothing more.
        #expect(throws: FilterFailure.self) { try vm.call(.contextCreate, [9, 1]) }
        let exits = WasmFilter.wat(imports: #"(import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))"#, """
            (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32) (call $exit (i32.const 3)) (i32.const 0))
            """)
        let exiting = try self.vm(exits)
        do {
            _ = try exiting.call(.requestHeaders, [2, 0, 1])
            Issue.record("proc_exit ends the VM")
        } catch {
            #expect(error.reason == "proc_exit(3)")
        }
    }

    @Test(arguments: FilterTests.Engine.allCases) func ticksAreScheduledAndAnOlderABIsCallbacksGetTheirOwnArguments(_ engine: FilterTests.Engine) throws {
        let ticks = NIOLockedValueBox<[Duration]>([])
        let ticking = WasmFilter.wat(
            imports: #"(import "env" "proxy_set_tick_period_milliseconds" (func $tick (param i32) (result i32)))"#,
            globals: "(global $ticks (mut i32) (i32.const 0))",
            configure: "(drop (call $tick (i32.const 250))) (i32.const 1)",
            """
            (func (export "proxy_on_tick") (param i32) (global.set $ticks (i32.add (global.get $ticks) (i32.const 1)))
              (i32.store (i32.const 500) (global.get $ticks)))
            """)
        let vm = try vm(ticking, ticks: ticks, engine: engine)
        #expect(ticks.withLockedValue { $0 } == [.milliseconds(250)])
        #expect(vm.tick() && vm.tick() && vm.memory!.readUInt32(500) == 2)
        // v0.1.0: proxy_on_request_headers takes (context, headers), and the marker differs.
        let old = """
            (module
              (memory (export "memory") 1)
              (func (export "proxy_abi_version_0_1_0"))
              (func (export "proxy_on_request_headers") (param i32 i32) (result i32)
                (i32.store (i32.const 100) (local.get 0)) (i32.store (i32.const 104) (local.get 1)) (i32.const 0)))
            """
        let legacy = try self.vm(old, engine: engine)
        #expect(legacy.filter.module.abiVersion == "proxy_abi_version_0_1_0")
        #expect(try legacy.call(.requestHeaders, [5, 3, 1]) == 0)
        #expect(legacy.memory!.readUInt32(100) == 5 && legacy.memory!.readUInt32(104) == 3)
    }
}
