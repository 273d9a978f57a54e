import NIOConcurrencyHelpers
import NIOEmbedded
import Testing
import WAT
@testable import Gateway

/// What a hostile module sends across the host functions, without sockets
/// (the wire rows are in FilterHostileTests):
///
/// | the module                                              | the host                                          |
/// |---------------------------------------------------------|---------------------------------------------------|
/// | an allocator that asks the host for bytes (re-entrant)  | a trap: the VM breaks, no native recursion        |
/// | a root callback (tick) reading a call's properties      | NotFound, as Envoy answers                        |
/// | a tick period, then its VM retired by a reload          | the timer holds the VM weakly: released, ticks end|
/// | side-call fields with CR/LF, a bad method or path       | BadArgument, nothing sent                         |
/// | more side calls in flight than the bound                | InternalFailure, nothing sent                     |
@Suite(.ownThreads) struct FilterHostileHostTests {
    let host = FilterHostTests()

    /// A module whose allocator reads a property: handing it any bytes re-enters the allocator.
    static func reentrant(configure: Bool) -> String {
        """
        (module
          (import "env" "proxy_get_property" (func $property (param i32 i32 i32 i32) (result i32)))
          (memory (export "memory") 2)
          (data (i32.const 100) "plugin_name")
          (func (export "proxy_abi_version_0_2_1"))
          (func (export "proxy_on_memory_allocate") (param i32) (result i32)
            (drop (call $property (i32.const 100) (i32.const 11) (i32.const 16) (i32.const 20)))
            (i32.const 4096))
          (func (export "proxy_on_context_create") (param i32 i32))
          (func (export "proxy_on_vm_start") (param i32 i32) (result i32) (i32.const 1))
          (func (export "proxy_on_configure") (param i32 i32) (result i32)
            \(configure ? "(drop (call $property (i32.const 100) (i32.const 11) (i32.const 16) (i32.const 20)))" : "") (i32.const 1))
          (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
            (drop (call $property (i32.const 100) (i32.const 11) (i32.const 16) (i32.const 20)))
            (i32.const 0))
        )
        """
    }

    @Test(arguments: FilterTests.Engine.allCases) func aReentrantAllocatorTrapsAndTheVMBreaks(_ engine: FilterTests.Engine) throws {
        let vm = try host.vm(Self.reentrant(configure: false), engine: engine)
        _ = try host.call(vm)
        #expect(throws: FilterFailure.self) { try vm.call(.requestHeaders, [2, 0, 1]) }
        #expect(vm.broken != nil)
        // From proxy_on_configure: the load fails with the reason (check and reload say so; nothing crashes).
        #expect(throws: FilterFailure.self) { _ = try host.vm(Self.reentrant(configure: true), engine: engine) }
    }

    @Test(arguments: FilterTests.Engine.allCases) func aRootCallbackReadsNoCallsProperties(_ engine: FilterTests.Engine) throws {
        let vm = try host.vm(engine: engine)
        _ = try host.call(vm)
        vm.act(for: vm.rootContext, nil)
        let path = host.put(vm, "request\u{0}id", at: 2000)
        #expect(try host.host(vm, "proxy_get_property", 2000, path, 1000, 1004) == FilterHostTests.notFound)
        let name = host.put(vm, "plugin_name", at: 2000)
        #expect(try host.host(vm, "proxy_get_property", 2000, name, 1000, 1004) == FilterHostTests.ok)
    }

    @Test(arguments: FilterTests.Engine.allCases) func aRetiredTickingVMIsReleasedAndItsTicksStop(_ engine: FilterTests.Engine) throws {
        let ticking = WasmFilter.wat(
            imports: #"(import "env" "proxy_log" (func $log (param i32 i32 i32) (result i32)))"#,
            data: #"(data (i32.const 100) "tick")"#,
            """
            (func (export "proxy_on_tick") (param i32) (drop (call $log (i32.const 2) (i32.const 100) (i32.const 4))))
            """)
        let loop = EmbeddedEventLoop()
        var vm: FilterVM? = try host.vm(ticking, engine: engine)
        weak let retired = vm
        vm!.tickPeriod = .milliseconds(10)
        LoopFilters.tick(vm!, every: .milliseconds(10), on: loop)
        loop.advanceTime(by: .milliseconds(35))
        let ticks = { host.lines.lines.withLockedValue { $0.filter { $0.1 == "tick" }.count } }
        #expect(ticks() == 3)
        vm = nil
        #expect(retired == nil, "a scheduled tick holds the VM")
        loop.advanceTime(by: .milliseconds(100))
        #expect(ticks() == 3)
    }

    @Test func sideCallFieldsAreCheckedAsRequestEditsAre() throws {
        let sent = NIOLockedValueBox(0)
        let vm = try host.vm(WasmFilter.wat(""), httpCall: { _, _ in sent.withLockedValue { $0 += 1 }; return true })
        _ = try host.call(vm)
        func call(_ pairs: [(String, String)]) throws -> Int32 {
            var bytes: [UInt8] = []
            ProxyWasm.append(UInt32(pairs.count), to: &bytes)
            for (name, value) in pairs {
                ProxyWasm.append(UInt32(name.utf8.count), to: &bytes)
                ProxyWasm.append(UInt32(value.utf8.count), to: &bytes)
            }
            for (name, value) in pairs { bytes += Array(name.utf8) + [0] + Array(value.utf8) + [0] }
            _ = vm.memory!.write(bytes, at: 3000)
            let upstream = host.put(vm, "auth", at: 2000)
            return try host.host(vm, "proxy_http_call", 2000, upstream, 3000, UInt32(bytes.count), 0, 0, 0, 0, 1000, 1100)
        }
        let base = [(":method", "GET"), (":path", "/check"), (":authority", "auth")]
        for hostile in [
            [(":method", "GET"), (":path", "/x HTTP/1.1\r\nX-Injected: yes\r\n\r\nGET /smuggled"), (":authority", "auth")],
            [(":method", "GET /x HTTP/1.1\r\n"), (":path", "/x"), (":authority", "auth")],
            [(":method", "GET"), (":path", "/x"), (":authority", "auth\r\nX-Injected: yes")],
            [(":method", "GET"), (":path", "no-slash"), (":authority", "auth")],
            base + [("x-key", "a\r\nX-Injected: yes")],
            base + [("bad name", "v")],
            base + [(":unknown", "v")],
        ] {
            #expect(try call(hostile) == FilterHostTests.badArgument, "\(hostile)")
        }
        #expect(sent.withLockedValue { $0 } == 0)
        // The bound on calls in flight: per context, then refused.
        for _ in 0..<FilterVM.maxHTTPCallsPerContext { #expect(try call(base) == FilterHostTests.ok) }
        #expect(try call(base) == 10)
        #expect(sent.withLockedValue { $0 } == FilterVM.maxHTTPCallsPerContext)
    }
}
