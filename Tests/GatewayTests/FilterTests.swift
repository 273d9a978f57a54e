import Foundation
import Testing
@testable import Gateway

/// Proxy-Wasm filters, written in WAT, loaded from a config and run on
/// calls: what reached a real upstream socket, and what the client got.
@Suite(.ownThreads) struct FilterTests {
    static func config(_ filters: [(name: String, wat: String, extra: String)], routes: String, upstreams: String) throws -> String {
        let declared = try filters.map { "  \($0.name): {wasm: \(try WasmFilter.file($0.wat))\($0.extra)}" }.joined(separator: "\n")
        return """
            listeners: [{address: 127.0.0.1:0}]
            upstreams:
            \(upstreams)
            filters:
            \(declared)
            routes:
            \(routes)
            """
    }

    /// A config whose only filter is `wat`: the loader's error for it.
    static func loadError(_ wat: String?, file: String? = nil) throws -> String {
        let path = try file ?? WasmFilter.file(wat!)
        do {
            _ = try ConfigLoader.load(yaml: """
                listeners: [{address: 127.0.0.1:0}]
                filters:
                  broken: {wasm: \(path)}
                routes: [{name: r, upstream: echo, filters: [broken]}]
                """, file: "gw.yaml")
            return ""
        } catch {
            return "\(error)"
        }
    }

    @Test func checkNamesTheFileLineAndWhatIsWrongWithAModule() throws {
        let text = FileManager.default.temporaryDirectory.appendingPathComponent("not-wasm-\(UUID()).wasm").path
        try Data("hello".utf8).write(to: URL(fileURLWithPath: text))
        let notWasm = try Self.loadError(nil, file: text)
        #expect(notWasm.contains("gw.yaml:3") && notWasm.contains("filters.broken.wasm") && notWasm.contains("is not a WebAssembly module"))
        let noABI = try Self.loadError(#"(module (memory (export "memory") 1))"#)
        #expect(noABI.contains("exports no Proxy-Wasm ABI version"))
        let unknownImport = try Self.loadError(WasmFilter.wat(imports: #"(import "env" "proxy_teleport" (func (param i32) (result i32)))"#, ""))
        #expect(unknownImport.contains("imports what gatewayd does not provide: env.proxy_teleport"))
        let refuses = try Self.loadError(WasmFilter.wat(configure: "(i32.const 0)", ""))
        #expect(refuses.contains("proxy_on_configure returned false"))
        let unknownName = try Self.loadError(WasmFilter.sign).isEmpty
        #expect(unknownName)
        do {
            _ = try ConfigLoader.load(yaml: """
                listeners: [{address: 127.0.0.1:0}]
                routes: [{name: r, upstream: echo, filters: [nope]}]
                """, file: "gw.yaml")
            Issue.record("an undeclared filter is refused")
        } catch {
            #expect("\(error)".contains("unknown filter 'nope'"))
        }
    }

    @Test func aFilterSignsTheRequestThatReachesTheUpstreamOverHTTP1AndH2c() async throws {
        let upstream = RecordingUpstream()
        let port = try await upstream.start()
        let gateway = try await GatewayHarness.start(try Self.config(
            [("sign", WasmFilter.sign, "")], routes: "  - {name: app, upstream: app, filters: [sign]}",
            upstreams: "  app: {url: http://127.0.0.1:\(port)}"))
        let http1 = try rawExchange(port: gateway.port, Array("GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
        #expect(http1.hasPrefix("HTTP/1.1 200"))
        let h2c = try curl(["-s", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code}", "\(gateway.base)/b"])
        #expect(h2c.text == "200")
        let requests = upstream.requests
        #expect(requests.map(\.uri) == ["/a", "/b"])
        #expect(requests.allSatisfy { $0.header("x-signed") == ["yes"] })
    }

    @Test func aLocalResponseAnswersTheClientAndNothingReachesTheUpstream() async throws {
        let headers = WasmFilter.map([("x-why", "policy")])
        let deny = WasmFilter.wat(
            imports: #"(import "env" "proxy_send_local_response" (func $local (param i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))"#,
            data: #"(data (i32.const 100) "denied by policy") (data (i32.const 200) "no entry") (data (i32.const 300) "\#(headers)")"#,
            """
            (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
              (drop (call $local (i32.const 403) (i32.const 100) (i32.const 16) (i32.const 200) (i32.const 8) (i32.const 300)
                (i32.const \(4 + 8 + 6 + 7)) (i32.const -1)))
              (i32.const 1))
            """)
        let upstream = RecordingUpstream()
        let port = try await upstream.start()
        let gateway = try await GatewayHarness.start(try Self.config(
            [("deny", deny, "")], routes: "  - {name: app, upstream: app, filters: [deny]}",
            upstreams: "  app: {url: http://127.0.0.1:\(port)}"))
        for http2 in [false, true] {
            let answer = try curl(["-s", "-i"] + (http2 ? ["--http2-prior-knowledge"] : []) + ["\(gateway.base)/secret"])
            #expect(answer.text.contains(" 403") && answer.text.contains("x-why: policy") && answer.text.hasSuffix("no entry"))
        }
        #expect(upstream.requests.isEmpty)
    }

    @Test func aTrapOrAnEndlessLoopFailsOnlyItsCallAndTheVMIsRebuilt() async throws {
        let trap = WasmFilter.wat("""
            (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32) unreachable)
            """)
        let spin = WasmFilter.wat("""
            (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32) (loop $forever (br $forever)) (i32.const 0))
            """)
        let upstream = RecordingUpstream()
        let port = try await upstream.start()
        let gateway = try await GatewayHarness.start(try Self.config(
            [("trap", trap, ""), ("spin", spin, ", fuel: 200000"), ("sign", WasmFilter.sign, ""), ("open", trap, ", fail_open: true")],
            routes: """
              - {name: trapped, match: {prefix: /trap}, upstream: app, filters: [trap]}
              - {name: spinning, match: {prefix: /spin}, upstream: app, filters: [spin]}
              - {name: open, match: {prefix: /open}, upstream: app, filters: [open]}
              - {name: fine, upstream: app, filters: [sign]}
            """,
            upstreams: "  app: {url: http://127.0.0.1:\(port)}"))
        for path in ["/trap", "/trap", "/spin", "/spin"] {
            let answer = try curl(["-s", "-i", "\(gateway.base)\(path)"])
            #expect(answer.text.hasPrefix("HTTP/1.1 500") && answer.text.contains("filter-failed"), "\(path): \(answer.text)")
            let served = try curl(["-s", "-o", "/dev/null", "-w", "%{http_code}", "\(gateway.base)/fine"])
            #expect(served.text == "200")
        }
        // fail_open: the call goes on unfiltered.
        let open = try curl(["-s", "-o", "/dev/null", "-w", "%{http_code}", "\(gateway.base)/open"])
        #expect(open.text == "200")
        #expect(upstream.requests.map(\.uri) == ["/fine", "/fine", "/fine", "/fine", "/open"])
    }
}
