import Foundation
import Testing
@testable import Gateway

/// A hostile module on the wire, on both engines: the daemon lives, the call
/// fails alone, nothing the module wrote reaches a socket unvalidated.
///
/// | the module                                             | the host                                                  |
/// |--------------------------------------------------------|-----------------------------------------------------------|
/// | a re-entrant allocator, on a call                      | 500 filter-failed for that call; the next one is served   |
/// | a re-entrant allocator, in proxy_on_configure          | the load fails and names the filter (check, reload)       |
/// | a side call with CR/LF in :path or a header            | refused (BadArgument); nothing reaches the side upstream   |
/// | a response `content-length: 2` edit                    | ignored: the client gets the whole body and its length    |
/// | a local response carrying transfer-encoding            | framed by the host: Content-Length only                   |
/// | recursion with large frames (3,000 live locals, 496 deep) | a trap (compiled: a guard in bytes), 500 for its call    |
/// | an endless loop in proxy_on_vm_start or proxy_on_configure | the load fails (fuel, or the 1 s start deadline), named  |
@Suite(.ownThreads) struct FilterHostileTests {
    @Test(arguments: FilterTests.Engine.allCases) func aReentrantAllocatorFailsOnlyItsCall(_ engine: FilterTests.Engine) async throws {
        try await Teardown.scope {
            let upstream = RecordingUpstream()
            let port = try await upstream.start()
            let gateway = try await GatewayHarness.start(try FilterTests.config(
                [("reenter", FilterHostileHostTests.reentrant(configure: false), ""), ("sign", WasmFilter.sign, "")],
                routes: """
                  - {name: hostile, match: {prefix: /hostile}, upstream: app, filters: [reenter]}
                  - {name: fine, upstream: app, filters: [sign]}
                """,
                upstreams: "  app: {url: http://127.0.0.1:\(port)}", engine: engine))
            for _ in 0..<3 {
                let answer = try curl(["-i", "\(gateway.base)/hostile"])
                #expect(answer.text.hasPrefix("HTTP/1.1 500") && answer.text.contains("filter-failed"), "\(answer.text)")
                #expect(try curl(["-o", "/dev/null", "-w", "%{http_code}", "\(gateway.base)/fine"]).text == "200")
            }
            #expect(upstream.requests.map(\.uri) == ["/fine", "/fine", "/fine"])
        }
        let refused = try FilterTests.loadError(FilterHostileHostTests.reentrant(configure: true))
        #expect(refused.contains("gw.yaml:") && refused.contains("filters.broken"), "\(refused)")
    }

    @Test(arguments: FilterTests.Engine.allCases) func aSideCallWithInjectedFieldsIsRefusedAndNothingIsSent(_ engine: FilterTests.Engine) async throws {
        let hostile = WasmFilter.map([(":method", "GET"), (":path", "/check HTTP/1.1\r\nX-Injected: yes\r\n\r\nGET /smuggled"), (":authority", "auth")])
        let size = hostile.count / 3
        // The call goes on when the side call is refused, and waits for it when it was sent.
        let module = WasmFilter.wat(
            imports: #"(import "env" "proxy_http_call" (func $call (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))"#,
            data: #"(data (i32.const 100) "auth") (data (i32.const 200) "\#(hostile)")"#,
            """
            (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
              (i32.ne (call $call (i32.const 100) (i32.const 4) (i32.const 200) (i32.const \(size)) (i32.const 0) (i32.const 0)
                (i32.const 0) (i32.const 0) (i32.const 1000) (i32.const 500)) (i32.const 2)))
            """)
        try await Teardown.scope {
            let auth = RawUpstream { _ in .init("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") }
            let authPort = try await auth.start()
            let app = RecordingUpstream()
            let appPort = try await app.start()
            let gateway = try await GatewayHarness.start(try FilterTests.config(
                [("call", module, "")], routes: "  - {name: app, upstream: app, filters: [call]}",
                upstreams: "  app: {url: http://127.0.0.1:\(appPort)}\n  auth: {url: http://127.0.0.1:\(authPort)}", engine: engine))
            #expect(try curl(["-o", "/dev/null", "-w", "%{http_code}", "\(gateway.base)/x"]).text == "200")
            #expect(auth.requests.isEmpty, "\(auth.requests.map(\.text))")
            #expect(app.requests.map(\.uri) == ["/x"])
        }
    }

    @Test(arguments: FilterTests.Engine.allCases) func framingFieldsAFilterWritesAreTheHosts(_ engine: FilterTests.Engine) async throws {
        let local = WasmFilter.map([("transfer-encoding", "chunked"), ("content-length", "999"), ("x-local", "yes")])
        let localSize = local.count / 3
        let module = WasmFilter.wat(
            imports: """
                (import "env" "proxy_replace_header_map_value" (func $replace (param i32 i32 i32 i32 i32) (result i32)))
                (import "env" "proxy_send_local_response" (func $local (param i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
                (import "env" "proxy_get_header_map_value" (func $get (param i32 i32 i32 i32 i32) (result i32)))
                """,
            data: #"(data (i32.const 100) "content-length") (data (i32.const 120) "2") (data (i32.const 140) ":path") (data (i32.const 200) "\#(local)") (data (i32.const 900) "local body")"#,
            """
            (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
              (drop (call $get (i32.const 0) (i32.const 140) (i32.const 5) (i32.const 16) (i32.const 20)))
              ;; "/local" answers here; anything else goes upstream.
              (if (i32.eq (i32.load8_u (i32.add (i32.load (i32.const 16)) (i32.const 1))) (i32.const 108))
                (then (drop (call $local (i32.const 200) (i32.const 0) (i32.const 0) (i32.const 900) (i32.const 10)
                  (i32.const 200) (i32.const \(localSize)) (i32.const 0))) (return (i32.const 1))))
              (i32.const 0))
            (func (export "proxy_on_response_headers") (param i32 i32 i32) (result i32)
              (drop (call $replace (i32.const 2) (i32.const 100) (i32.const 14) (i32.const 120) (i32.const 1)))
              (i32.const 0))
            """)
        try await Teardown.scope {
            let body = String(repeating: "a", count: 280)
            let app = RecordingUpstream { _ in .respond(status: 200, headers: [], body: Array(body.utf8)) }
            let port = try await app.start()
            let gateway = try await GatewayHarness.start(try FilterTests.config(
                [("frame", module, "")], routes: "  - {name: app, upstream: app, filters: [frame]}",
                upstreams: "  app: {url: http://127.0.0.1:\(port)}", engine: engine))
            // Two pipelined requests: the first answer's framing must hold for the second to be read.
            let pipelined = try rawExchange(port: gateway.port, Array("GET /a HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n".utf8))
            let answers = pipelined.components(separatedBy: "HTTP/1.1 200 OK\r\n")
            #expect(answers.count == 3 && answers.dropFirst().allSatisfy { $0.contains("\r\nContent-Length: 280\r\n") || $0.contains("\r\ncontent-length: 280\r\n") }, "\(pipelined)")
            #expect(pipelined.hasSuffix("\r\n\r\n" + body))
            let own = try curl(["-i", "\(gateway.base)/local"]).text
            #expect(own.hasPrefix("HTTP/1.1 200") && own.contains("x-local: yes") && own.hasSuffix("local body"), "\(own)")
            #expect(!own.lowercased().contains("transfer-encoding") && own.contains("Content-Length: 10\r\n"), "\(own)")
        }
    }

    /// A function with 3,000 live locals recursing `depth` deep: about 24 KB a
    /// frame compiled, 12 MiB at 496, more than an event loop's 8 MiB stack.
    /// (`memory 2`: its loads stay within the module's two pages.)
    static func deepRecursion(depth: Int) -> String {
        let locals = 3000
        var body = (0..<locals).map { "(local $l\($0) i64)" }.joined(separator: " ") + "\n"
        // Loaded from memory the callee writes: the C compiler cannot recompute them after the call, so each frame keeps them all.
        for i in 0..<locals { body += "i32.const \(8192 + (i % 4096) * 8) i64.load local.set $l\(i)\n" }
        body += "i32.const 8192 local.get $n i64.extend_i32_u i64.store\n"
        body += "local.get $n i32.eqz if i64.const 0 return end\n"
        body += "local.get $n i32.const 1 i32.sub call $deep\n"
        // Each folded into the call's result by a rotation: no accumulator or reassociation lets the compiler sum them first.
        for i in 0..<locals { body += "local.get $l\(i) i64.rotl\n" }
        return WasmFilter.wat("""
            (func $deep (param $n i32) (result i64)
            \(body))
            (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
              ;; Kept: a result no one reads lets the C compiler drop the sums, and the frames with them.
              (i64.store (i32.const 64) (call $deep (i32.const \(depth))))
              (i32.const 0))
            """)
    }

    @Test(arguments: FilterTests.Engine.allCases) func deepRecursionWithLargeFramesIsATrap(_ engine: FilterTests.Engine) async throws {
        try await Teardown.scope {
            let upstream = RecordingUpstream()
            let port = try await upstream.start()
            let gateway = try await GatewayHarness.start(try FilterTests.config(
                [("deep", Self.deepRecursion(depth: 496), ""), ("sign", WasmFilter.sign, "")],
                routes: """
                  - {name: deep, match: {prefix: /deep}, upstream: app, filters: [deep]}
                  - {name: fine, upstream: app, filters: [sign]}
                """,
                upstreams: "  app: {url: http://127.0.0.1:\(port)}", engine: engine))
            for _ in 0..<2 {
                let answer = try curl(["-i", "\(gateway.base)/deep"])
                #expect(answer.text.hasPrefix("HTTP/1.1 500") && answer.text.contains("filter-failed"), "\(answer.text)")
                #expect(try curl(["-o", "/dev/null", "-w", "%{http_code}", "\(gateway.base)/fine"]).text == "200")
            }
            #expect(upstream.requests.map(\.uri) == ["/fine", "/fine"])
        }
    }

    /// A module that never finishes starting fails its load, on both engines:
    /// `check` says so and a reload is refused, instead of wedging either.
    @Test(arguments: FilterTests.Engine.allCases, ["proxy_on_vm_start", "proxy_on_configure"])
    func aStartThatNeverEndsFailsTheLoad(_ engine: FilterTests.Engine, callback: String) throws {
        let spin = "(loop $forever (br $forever)) (i32.const 1)"
        let module = callback == "proxy_on_configure" ? WasmFilter.wat(configure: spin, "")
            : WasmFilter.wat("").replacingOccurrences(of: "(func (export \"proxy_on_vm_start\") (param i32 i32) (result i32) (i32.const 1))",
                                                      with: "(func (export \"proxy_on_vm_start\") (param i32 i32) (result i32) \(spin))")
        #expect(module.contains(spin))
        let path = try WasmFilter.file(module)
        do {
            _ = try ConfigLoader.load(yaml: """
                listeners: [{address: 127.0.0.1:0}]
                filters:
                  broken: {wasm: \(path)\(engine.key)\(engine == .interpreter ? ", fuel: 200000" : "")}
                routes: [{name: r, upstream: echo, filters: [broken]}]
                """, file: "gw.yaml")
            Issue.record("the module loaded")
        } catch {
            let reason = engine == .interpreter ? "fuel exhausted" : "deadline exceeded"
            #expect("\(error)".contains("filters.broken") && "\(error)".contains(reason), "\(error)")
        }
    }
}
