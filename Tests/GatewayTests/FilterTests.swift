import Foundation
import Testing
import WAT
@testable import Gateway

/// Proxy-Wasm filters, written in WAT, loaded from a config and run on
/// calls: what reached a real upstream socket, and what the client got.
@Suite(.ownThreads) struct FilterTests {
    /// Each call test runs on both engines: WasmKit's interpreter and the module compiled (wasm2c and cc).
    enum Engine: String, CaseIterable, CustomTestStringConvertible {
        case interpreter, compiled

        /// The filter's config keys for it.
        var key: String { self == .compiled ? ", engine: compiled" : "" }
        var testDescription: String { rawValue }
    }

    static func config(_ filters: [(name: String, wat: String, extra: String)], routes: String, upstreams: String,
                       engine: Engine = .interpreter) throws -> String {
        let declared = try filters.map { "  \($0.name): {wasm: \(try WasmFilter.file($0.wat))\($0.extra)\(engine.key)}" }.joined(separator: "\n")
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

    @Test func aCompiledFilterIsCheckedWithItsFileLineAndKey() throws {
        let path = try WasmFilter.file(WasmFilter.sign)
        func loadError(_ keys: String) -> String {
            do {
                _ = try ConfigLoader.load(yaml: """
                    listeners: [{address: 127.0.0.1:0}]
                    filters:
                      f: {wasm: \(path)\(keys)}
                    routes: [{name: r, upstream: echo, filters: [f]}]
                    """, file: "gw.yaml")
                return ""
            } catch {
                return "\(error)"
            }
        }
        #expect(loadError(", engine: compiled") == "")
        let fuel = loadError(", engine: compiled, fuel: 5000")
        #expect(fuel.contains("gw.yaml:3") && fuel.contains("filters.f.fuel") && fuel.contains("runs unmetered"), "\(fuel)")
        // The module's two pages are past a one-page cap.
        let memory = loadError(", engine: compiled, max_memory: 65536")
        #expect(memory.contains("gw.yaml:3") && memory.contains("max_memory reached"), "\(memory)")
        let unknown = loadError(", engine: jit")
        #expect(unknown.contains("gw.yaml:3") && unknown.contains("filters.f.engine"), "\(unknown)")
    }

    /// Code is loaded from the cache: one that others can write is not used.
    @Test func aCacheDirectoryOthersCanWriteIsRefused() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("cache-\(UUID())").path
        let bytes = try wat2wasm(WasmFilter.sign)
        let built = try FilterCompiler.library(for: bytes, environment: ["XDG_CACHE_HOME": root])
        #expect(built.hasPrefix("\(root)/gatewayd/filters/") && FileManager.default.fileExists(atPath: built))
        chmod("\(root)/gatewayd/filters", 0o777)
        #expect(throws: FilterCompiler.Failure.self) { try FilterCompiler.library(for: bytes, environment: ["XDG_CACHE_HOME": root]) }
        chmod("\(root)/gatewayd/filters", 0o700)
        chmod("\(root)/gatewayd", 0o777)
        do {
            _ = try FilterCompiler.library(for: bytes, environment: ["XDG_CACHE_HOME": root])
            Issue.record("a parent others can write is refused")
        } catch {
            #expect(error.description.contains("\(root)/gatewayd is not gatewayd's own"))
        }
    }

    /// A compiler that is missing or fails is named, with what it printed.
    @Test func aMissingOrFailingCompilerIsNamed() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("cache-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let bytes = try wat2wasm(WasmFilter.sign)
        for (cc, expected) in [("gatewayd-no-such-cc", "gatewayd-no-such-cc is not installed"), ("false", "false failed (status 1)")] {
            do {
                _ = try FilterCompiler.library(for: bytes, environment: ["XDG_CACHE_HOME": root, "CC": cc])
                Issue.record("\(cc) built a library")
            } catch {
                #expect(error.description.hasPrefix(expected), "\(error)")
            }
        }
    }

    @Test(arguments: Engine.allCases) func aFilterSignsTheRequestThatReachesTheUpstreamOverHTTP1AndH2c(_ engine: Engine) async throws {
        let upstream = RecordingUpstream()
        let port = try await upstream.start()
        let gateway = try await GatewayHarness.start(try Self.config(
            [("sign", WasmFilter.sign, "")], routes: "  - {name: app, upstream: app, filters: [sign]}",
            upstreams: "  app: {url: http://127.0.0.1:\(port)}", engine: engine))
        let http1 = try rawExchange(port: gateway.port, Array("GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
        #expect(http1.hasPrefix("HTTP/1.1 200"))
        let h2c = try curl(["-s", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code}", "\(gateway.base)/b"])
        #expect(h2c.text == "200")
        let requests = upstream.requests
        #expect(requests.map(\.uri) == ["/a", "/b"])
        #expect(requests.allSatisfy { $0.header("x-signed") == ["yes"] })
    }

    /// A filter that adds `x-order: <name>` to the request and to the response.
    static func orderMark(_ name: String) -> String {
        WasmFilter.wat(
            imports: #"(import "env" "proxy_add_header_map_value" (func $add (param i32 i32 i32 i32 i32) (result i32)))"#,
            data: #"(data (i32.const 100) "x-order") (data (i32.const 200) "\#(name)")"#,
            """
            (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
              (drop (call $add (i32.const 0) (i32.const 100) (i32.const 7) (i32.const 200) (i32.const \(name.utf8.count)))) (i32.const 0))
            (func (export "proxy_on_response_headers") (param i32 i32 i32) (result i32)
              (drop (call $add (i32.const 2) (i32.const 100) (i32.const 7) (i32.const 200) (i32.const \(name.utf8.count)))) (i32.const 0))
            """)
    }

    @Test(arguments: Engine.allCases) func aChainRunsInOrderOnTheRequestAndInReverseOnTheResponse(_ engine: Engine) async throws {
        let upstream = RecordingUpstream()
        let port = try await upstream.start()
        let gateway = try await GatewayHarness.start(try Self.config(
            [("first", Self.orderMark("first"), ""), ("second", Self.orderMark("second"), ""), ("third", Self.orderMark("third"), "")],
            routes: "  - {name: app, upstream: app, filters: [first, second, third]}",
            upstreams: "  app: {url: http://127.0.0.1:\(port)}", engine: engine))
        for http2 in [false, true] {
            let answer = try curl(["-s", "-i"] + (http2 ? ["--http2-prior-knowledge"] : []) + ["\(gateway.base)/chain"]).text.lowercased()
            let marks = answer.split(separator: "\r\n").filter { $0.hasPrefix("x-order:") }
            #expect(marks == ["x-order: third", "x-order: second", "x-order: first"], "\(answer)")
        }
        #expect(upstream.requests.count == 2)
        #expect(upstream.requests.allSatisfy { $0.header("x-order") == ["first", "second", "third"] })
    }

    /// Adds to the response, as `x-<name>` headers, properties read when it came: the call's as it is then
    /// (numbers written in decimal).
    static let properties = WasmFilter.wat(
        imports: """
            (import "env" "proxy_get_property" (func $get (param i32 i32 i32 i32) (result i32)))
            (import "env" "proxy_add_header_map_value" (func $add (param i32 i32 i32 i32 i32) (result i32)))
            """,
        data: #"""
            (data (i32.const 100) "route_name") (data (i32.const 120) "request.id") (data (i32.const 140) "upstream.address")
            (data (i32.const 160) "request.protocol") (data (i32.const 180) "source.address") (data (i32.const 200) "source.port")
            (data (i32.const 220) "destination.address") (data (i32.const 250) "connection.tls_version")
            (data (i32.const 300) "x-route") (data (i32.const 320) "x-id") (data (i32.const 340) "x-upstream") (data (i32.const 360) "x-proto")
            (data (i32.const 380) "x-source") (data (i32.const 400) "x-source-port") (data (i32.const 420) "x-destination")
            (data (i32.const 440) "x-tls")
            """#,
        """
        (func $copy (param $path i32) (param $pathSize i32) (param $name i32) (param $nameSize i32)
          (if (i32.eqz (call $get (local.get $path) (local.get $pathSize) (i32.const 1000) (i32.const 1004)))
            (then (drop (call $add (i32.const 2) (local.get $name) (local.get $nameSize) (i32.load (i32.const 1000)) (i32.load (i32.const 1004)))))))
        (func $copyNumber (param $path i32) (param $pathSize i32) (param $name i32) (param $nameSize i32)
          (local $n i64) (local $at i32)
          (if (i32.eqz (call $get (local.get $path) (local.get $pathSize) (i32.const 1000) (i32.const 1004)))
            (then
              (local.set $n (i64.load (i32.load (i32.const 1000))))
              (local.set $at (i32.const 1120))
              (loop $digit
                (local.set $at (i32.sub (local.get $at) (i32.const 1)))
                (i32.store8 (local.get $at) (i32.add (i32.const 48) (i32.wrap_i64 (i64.rem_u (local.get $n) (i64.const 10)))))
                (local.set $n (i64.div_u (local.get $n) (i64.const 10)))
                (br_if $digit (i64.ne (local.get $n) (i64.const 0))))
              (drop (call $add (i32.const 2) (local.get $name) (local.get $nameSize) (local.get $at) (i32.sub (i32.const 1120) (local.get $at)))))))
        (func (export "proxy_on_response_headers") (param i32 i32 i32) (result i32)
          (call $copy (i32.const 100) (i32.const 10) (i32.const 300) (i32.const 7))
          (call $copy (i32.const 120) (i32.const 10) (i32.const 320) (i32.const 4))
          (call $copy (i32.const 140) (i32.const 16) (i32.const 340) (i32.const 10))
          (call $copy (i32.const 160) (i32.const 16) (i32.const 360) (i32.const 7))
          (call $copy (i32.const 180) (i32.const 14) (i32.const 380) (i32.const 8))
          (call $copyNumber (i32.const 200) (i32.const 11) (i32.const 400) (i32.const 13))
          (call $copy (i32.const 220) (i32.const 19) (i32.const 420) (i32.const 13))
          (call $copy (i32.const 250) (i32.const 22) (i32.const 440) (i32.const 5))
          (i32.const 0))
        """)

    /// The response's headers from `curl -i -w "\nPORT=%{local_port}"`, and the port curl used.
    static func headersAndPort(_ answer: String) -> (headers: [String: String], port: String?) {
        var headers: [String: String] = [:]
        for line in answer.split(separator: "\r\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return (headers, answer.split(separator: "PORT=").last.map(String.init))
    }

    @Test(arguments: Engine.allCases) func aFilterReadsTheCallsPropertiesAsTheyAreWhenTheResponseComes(_ engine: Engine) async throws {
        let upstream = RecordingUpstream()
        let port = try await upstream.start()
        let gateway = try await GatewayHarness.start(try Self.config(
            [("props", Self.properties, "")], routes: "  - {name: app, upstream: app, filters: [props]}",
            upstreams: "  app: {url: http://127.0.0.1:\(port)}", engine: engine))
        for http2 in [false, true] {
            let answer = try curl(["-s", "-i", "-w", "\nPORT=%{local_port}"] + (http2 ? ["--http2-prior-knowledge"] : []) + ["\(gateway.base)/p"]).text
            let (headers, clientPort) = Self.headersAndPort(answer)
            #expect(headers["x-route"] == "app", "\(answer)")
            #expect(headers["x-id"] != nil && headers["x-id"] == headers["x-request-id"], "\(answer)")
            #expect(headers["x-upstream"] == "127.0.0.1:\(port)", "\(answer)")
            #expect(headers["x-proto"] == (http2 ? "HTTP/2" : "HTTP/1.1"), "\(answer)")
            #expect(clientPort != nil && headers["x-source"] == "127.0.0.1:\(clientPort ?? "")", "\(answer)")
            #expect(clientPort != nil && headers["x-source-port"] == clientPort, "\(answer)")
            #expect(headers["x-destination"] == "127.0.0.1:\(gateway.port)", "\(answer)")
            // Cleartext: no TLS version to read.
            #expect(headers["x-tls"] == nil, "\(answer)")
        }
        #expect(upstream.requests.count == 2)
    }

    @Test func aFilterOnATLSListenerReadsTheConnectionsTLSVersion() async throws {
        let (certificate, key) = try TLSListenerTests.makeCertificate()
        let upstream = RecordingUpstream()
        let port = try await upstream.start()
        let gateway = try await GatewayHarness.start(try Self.config(
            [("props", Self.properties, "")], routes: "  - {name: app, upstream: app, filters: [props]}",
            upstreams: "  app: {url: http://127.0.0.1:\(port)}").replacingOccurrences(
                of: "listeners: [{address: 127.0.0.1:0}]",
                with: "listeners: [{address: 127.0.0.1:0, tls: {certificate: \"\(certificate)\", private_key: \"\(key)\"}}]"))
        for version in ["--http1.1", "--http2"] {
            let answer = try curl(["-s", "-k", "-i", version, "--tlsv1.2", "--tls-max", "1.2", "https://127.0.0.1:\(gateway.port)/p"]).text
            #expect(Self.headersAndPort(answer).headers["x-tls"] == "TLSv1.2", "\(answer)")
            let newest = try curl(["-s", "-k", "-i", version, "https://127.0.0.1:\(gateway.port)/p"]).text
            #expect(Self.headersAndPort(newest).headers["x-tls"] == "TLSv1.3", "\(newest)")
        }
        #expect(upstream.requests.count == 4)
    }

    @Test(arguments: Engine.allCases) func aLocalResponseAnswersTheClientAndNothingReachesTheUpstream(_ engine: Engine) async throws {
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
            upstreams: "  app: {url: http://127.0.0.1:\(port)}", engine: engine))
        for http2 in [false, true] {
            let answer = try curl(["-s", "-i"] + (http2 ? ["--http2-prior-knowledge"] : []) + ["\(gateway.base)/secret"])
            #expect(answer.text.contains(" 403") && answer.text.contains("x-why: policy") && answer.text.hasSuffix("no entry"))
        }
        #expect(upstream.requests.isEmpty)
    }

    /// An endless loop is stopped on both engines: the interpreter's by its
    /// fuel, a compiled filter's by its callback's deadline.
    @Test(arguments: Engine.allCases) func aTrapOrAnEndlessLoopFailsOnlyItsCallAndTheVMIsRebuilt(_ engine: Engine) async throws {
        let trap = WasmFilter.wat("""
            (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32) unreachable)
            """)
        let spin = WasmFilter.wat("""
            (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32) (loop $forever (br $forever)) (i32.const 0))
            """)
        // A host function's failure unwinds the guest: proc_exit ends the VM.
        let exit = WasmFilter.wat(imports: #"(import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))"#, """
            (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32) (call $exit (i32.const 3)) (i32.const 0))
            """)
        let upstream = RecordingUpstream()
        let port = try await upstream.start()
        let gateway = try await GatewayHarness.start(try Self.config(
            [("trap", trap, ""), ("exit", exit, ""), ("sign", WasmFilter.sign, ""), ("open", trap, ", fail_open: true")]
                + [("spin", spin, engine == .interpreter ? ", fuel: 200000" : "")],
            routes: """
              - {name: trapped, match: {prefix: /trap}, upstream: app, filters: [trap]}
              - {name: exits, match: {prefix: /exit}, upstream: app, filters: [exit]}
              - {name: open, match: {prefix: /open}, upstream: app, filters: [open]}
              - {name: spinning, match: {prefix: /spin}, upstream: app, filters: [spin]}
              - {name: fine, upstream: app, filters: [sign]}
            """,
            upstreams: "  app: {url: http://127.0.0.1:\(port)}", engine: engine))
        for path in ["/trap", "/trap", "/exit", "/exit", "/spin", "/spin"] {
            let answer = try curl(["-s", "-i", "\(gateway.base)\(path)"])
            #expect(answer.text.hasPrefix("HTTP/1.1 500") && answer.text.contains("filter-failed"), "\(path): \(answer.text)")
            let served = try curl(["-s", "-o", "/dev/null", "-w", "%{http_code}", "\(gateway.base)/fine"])
            #expect(served.text == "200")
        }
        // fail_open: the call goes on unfiltered.
        let open = try curl(["-s", "-o", "/dev/null", "-w", "%{http_code}", "\(gateway.base)/open"])
        #expect(open.text == "200")
        #expect(upstream.requests.map(\.uri) == Array(repeating: "/fine", count: 6) + ["/open"])
    }

    @Test(arguments: Engine.allCases) func aFilterPausesForAnAuthCallAndContinuesOrRefusesOnItsAnswer(_ engine: Engine) async throws {
        let call = WasmFilter.map([(":method", "GET"), (":path", "/check"), (":authority", "auth")])
        let callSize = 4 + 3 * 8 + (7 + 1 + 3 + 1) + (5 + 1 + 6 + 1) + (10 + 1 + 4 + 1)
        let auth = WasmFilter.wat(
            imports: """
                (import "env" "proxy_http_call" (func $call (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
                (import "env" "proxy_continue_stream" (func $continue (param i32) (result i32)))
                (import "env" "proxy_send_local_response" (func $local (param i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
                """,
            data: #"(data (i32.const 100) "auth") (data (i32.const 200) "\#(call)") (data (i32.const 600) "denied")"#,
            """
            (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
              (drop (call $call (i32.const 100) (i32.const 4) (i32.const 200) (i32.const \(callSize)) (i32.const 0) (i32.const 0)
                (i32.const 0) (i32.const 0) (i32.const 1000) (i32.const 500)))
              (i32.const 1))
            (func (export "proxy_on_http_call_response") (param i32 i32 i32 i32 i32)
              (if (i32.gt_u (local.get 3) (i32.const 0))
                (then (drop (call $continue (i32.const 0))))
                (else (drop (call $local (i32.const 401) (i32.const 600) (i32.const 6) (i32.const 600) (i32.const 6) (i32.const 0)
                  (i32.const 0) (i32.const -1))))))
            """)
        // The auth service says yes (a body) to the first call of each pair, no (403, empty) to the second.
        let authService = RecordingUpstream.counting { _, count in
            count % 2 == 1 ? .respond(status: 200, headers: [], body: Array("ok".utf8)) : .respond(status: 403, headers: [], body: [])
        }
        let authPort = try await authService.start()
        let app = RecordingUpstream()
        let appPort = try await app.start()
        let gateway = try await GatewayHarness.start(try Self.config(
            [("auth", auth, "")], routes: "  - {name: app, upstream: app, filters: [auth]}",
            upstreams: "  app: {url: http://127.0.0.1:\(appPort)}\n  auth: {url: http://127.0.0.1:\(authPort)}", engine: engine))
        for http2 in [false, true] {
            let flags = ["-s", "-o", "/dev/null", "-w", "%{http_code}"] + (http2 ? ["--http2-prior-knowledge"] : [])
            #expect(try curl(flags + ["\(gateway.base)/allowed"]).text == "200")
            #expect(try curl(flags + ["\(gateway.base)/refused"]).text == "401")
        }
        #expect(authService.requests.map(\.uri) == ["/check", "/check", "/check", "/check"])
        #expect(app.requests.map(\.uri) == ["/allowed", "/allowed"])
    }

    @Test(arguments: Engine.allCases) func aFilterRewritesTheJSONBodyAndItsLengthFollows(_ engine: Engine) async throws {
        let rewrite = WasmFilter.wat(
            imports: #"(import "env" "proxy_set_buffer_bytes" (func $set (param i32 i32 i32 i32 i32) (result i32)))"#,
            data: #"(data (i32.const 100) "{\"rewritten\":true}")"#,
            """
            (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32) (i32.const 0))
            (func (export "proxy_on_request_body") (param i32 i32 i32) (result i32)
              (drop (call $set (i32.const 0) (i32.const 0) (local.get 1) (i32.const 100) (i32.const 18)))
              (i32.const 0))
            """)
        let upstream = RecordingUpstream()
        let port = try await upstream.start()
        let gateway = try await GatewayHarness.start(try Self.config(
            [("rewrite", rewrite, "")], routes: "  - {name: app, upstream: app, filters: [rewrite]}",
            upstreams: "  app: {url: http://127.0.0.1:\(port)}", engine: engine))
        for http2 in [false, true] {
            let flags = ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Content-Type: application/json", "--data-binary",
                         #"{"original":"a much longer body than the new one"}"#] + (http2 ? ["--http2-prior-knowledge"] : [])
            #expect(try curl(flags + ["\(gateway.base)/items"]).text == "200")
        }
        let requests = upstream.requests
        #expect(requests.count == 2)
        #expect(requests.allSatisfy { String(decoding: $0.body, as: UTF8.self) == #"{"rewritten":true}"# && $0.header("Content-Length") == ["18"] })
    }

    @Test(arguments: Engine.allCases) func aFilterEditsTheResponseHead(_ engine: Engine) async throws {
        let edit = WasmFilter.wat(
            imports: """
                (import "env" "proxy_add_header_map_value" (func $add (param i32 i32 i32 i32 i32) (result i32)))
                (import "env" "proxy_remove_header_map_value" (func $remove (param i32 i32 i32) (result i32)))
                """,
            data: #"(data (i32.const 100) "x-filtered") (data (i32.const 200) "1") (data (i32.const 300) "x-internal")"#,
            """
            (func (export "proxy_on_response_headers") (param i32 i32 i32) (result i32)
              (drop (call $add (i32.const 2) (i32.const 100) (i32.const 10) (i32.const 200) (i32.const 1)))
              (drop (call $remove (i32.const 2) (i32.const 300) (i32.const 10)))
              (i32.const 0))
            """)
        let upstream = RecordingUpstream { _ in .respond(status: 200, headers: [("X-Internal", "secret")], body: Array("hello".utf8)) }
        let port = try await upstream.start()
        let gateway = try await GatewayHarness.start(try Self.config(
            [("edit", edit, "")], routes: "  - {name: app, upstream: app, filters: [edit]}",
            upstreams: "  app: {url: http://127.0.0.1:\(port)}", engine: engine))
        for http2 in [false, true] {
            let answer = try curl(["-s", "-i"] + (http2 ? ["--http2-prior-knowledge"] : []) + ["\(gateway.base)/x"]).text.lowercased()
            #expect(answer.contains("x-filtered: 1") && !answer.contains("x-internal") && answer.hasSuffix("hello"), "\(answer)")
        }
    }

    @Test(arguments: Engine.allCases) func aFilterRewritesTheResponseBodyAndItsLengthFollows(_ engine: Engine) async throws {
        let redact = WasmFilter.wat(
            imports: #"(import "env" "proxy_set_buffer_bytes" (func $set (param i32 i32 i32 i32 i32) (result i32)))"#,
            data: #"(data (i32.const 100) "{\"redacted\":true}")"#,
            """
            (func (export "proxy_on_response_body") (param i32 i32 i32) (result i32)
              (drop (call $set (i32.const 1) (i32.const 0) (local.get 1) (i32.const 100) (i32.const 17)))
              (i32.const 0))
            """)
        let upstream = RecordingUpstream { _ in
            .respond(status: 200, headers: [("Content-Type", "application/json")], body: Array(#"{"card":"4111 1111 1111 1111"}"#.utf8))
        }
        let port = try await upstream.start()
        let gateway = try await GatewayHarness.start(try Self.config(
            [("redact", redact, "")], routes: "  - {name: app, upstream: app, filters: [redact]}",
            upstreams: "  app: {url: http://127.0.0.1:\(port)}", engine: engine))
        for http2 in [false, true] {
            let answer = try curl(["-s", "-i"] + (http2 ? ["--http2-prior-knowledge"] : []) + ["\(gateway.base)/card"]).text
            #expect(answer.hasSuffix(#"{"redacted":true}"#) && answer.lowercased().contains("content-length: 17"), "\(answer)")
        }
    }

    @Test(arguments: Engine.allCases) func aFiltersMetricIsOnTheAdminEndpoint(_ engine: Engine) async throws {
        let count = WasmFilter.wat(
            imports: """
                (import "env" "proxy_define_metric" (func $define (param i32 i32 i32 i32) (result i32)))
                (import "env" "proxy_increment_metric" (func $increment (param i32 i64) (result i32)))
                """,
            data: #"(data (i32.const 100) "signed_calls")"#,
            globals: "(global $metric (mut i32) (i32.const 0))",
            configure: "(drop (call $define (i32.const 0) (i32.const 100) (i32.const 12) (i32.const 500))) (global.set $metric (i32.load (i32.const 500))) (i32.const 1)",
            """
            (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
              (drop (call $increment (global.get $metric) (i64.const 1)))
              (i32.const 0))
            """)
        let gateway = try SpawnedGateway(yaml: """
            listeners: [{address: 127.0.0.1:0}]
            admin: {address: 127.0.0.1:0}
            filters:
              count: {wasm: \(try WasmFilter.file(count))\(engine.key)}
            routes: [{name: echoed, upstream: echo, filters: [count]}]
            """)
        defer { gateway.stop() }
        let admin = "http://127.0.0.1:\(try #require(gateway.adminPort))"
        for _ in 1...3 { #expect(try curl(["-s", "-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(gateway.port)/e"]).text == "200") }
        let metrics = try curl(["\(admin)/metrics"]).text
        #expect(metrics.contains(#"gatewayd_filter_signed_calls{filter="count"} 3"#), "\(metrics)")
        #expect(metrics.contains("# HELP gatewayd_filter_signed_calls "))
    }

    @Test func aReloadSwapsModulesAndACallInFlightFinishesOnItsOwnVM() async throws {
        // Filter "a" waits for an auth call, then marks the request; "b" marks it at once.
        let call = WasmFilter.map([(":method", "GET"), (":path", "/slow"), (":authority", "auth")])
        let callSize = 4 + 3 * 8 + (7 + 1 + 3 + 1) + (5 + 1 + 5 + 1) + (10 + 1 + 4 + 1)
        func marking(_ mark: String, waits: Bool) -> String {
            WasmFilter.wat(
                imports: """
                    (import "env" "proxy_http_call" (func $call (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
                    (import "env" "proxy_continue_stream" (func $continue (param i32) (result i32)))
                    (import "env" "proxy_add_header_map_value" (func $add (param i32 i32 i32 i32 i32) (result i32)))
                    """,
                data: #"(data (i32.const 100) "auth") (data (i32.const 200) "\#(call)") (data (i32.const 600) "x-filter") (data (i32.const 700) "\#(mark)")"#,
                """
                (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32)
                  \(waits ? """
                      (drop (call $call (i32.const 100) (i32.const 4) (i32.const 200) (i32.const \(callSize)) (i32.const 0) (i32.const 0)
                        (i32.const 0) (i32.const 0) (i32.const 5000) (i32.const 500)))
                      (i32.const 1))
                      """ : """
                      (drop (call $add (i32.const 0) (i32.const 600) (i32.const 8) (i32.const 700) (i32.const 1)))
                      (i32.const 0))
                      """)
                (func (export "proxy_on_http_call_response") (param i32 i32 i32 i32 i32)
                  (drop (call $add (i32.const 0) (i32.const 600) (i32.const 8) (i32.const 700) (i32.const 1)))
                  (drop (call $continue (i32.const 0))))
                """)
        }
        let auth = RecordingUpstream { _ in .respond(status: 200, headers: [], body: Array("ok".utf8), delay: .milliseconds(600)) }
        let authPort = try await auth.start()
        let app = RecordingUpstream()
        let appPort = try await app.start()
        let upstreams = "  app: {url: http://127.0.0.1:\(appPort)}\n  auth: {url: http://127.0.0.1:\(authPort)}"
        let before = try Self.config([("mark", marking("a", waits: true), "")], routes: "  - {name: app, upstream: app, filters: [mark]}",
                                     upstreams: upstreams)
        let gateway = try await GatewayHarness.start(before)
        async let inFlight = curlDetached(["-s", "-o", "/dev/null", "-w", "%{http_code}", "\(gateway.base)/first"])
        #expect(await eventually(timeout: 5) { auth.requests.count == 1 })
        let after = try Self.config([("mark", marking("b", waits: false), "")], routes: "  - {name: app, upstream: app, filters: [mark]}",
                                    upstreams: upstreams)
        try await gateway.server.reload(try ConfigLoader.load(yaml: after, file: "test.yaml").config)
        #expect(try curl(["-s", "-o", "/dev/null", "-w", "%{http_code}", "\(gateway.base)/second"]).text == "200")
        #expect(try await inFlight.text == "200")
        let marks = Dictionary(uniqueKeysWithValues: app.requests.map { ($0.uri, $0.header("x-filter")) })
        #expect(marks == ["/first": ["a"], "/second": ["b"]])
    }

    /// Debian's clang, lld and wasi-libc (scripts/test installs them).
    static let clang = ["/usr/bin/clang-14", "/usr/bin/clang"].first { FileManager.default.isExecutableFile(atPath: $0) }

    @Test(arguments: Engine.allCases) func aFilterWrittenInCAndBuiltHereSignsWhatReachesTheUpstream(_ engine: Engine) async throws {
        let clang = try #require(Self.clang, "clang with wasm32-wasi (apt install clang lld wasi-libc libclang-rt-14-dev-wasm32)")
        let sources = ConfigFilesTests.root.appendingPathComponent("config/examples/filters")
        let built = FileManager.default.temporaryDirectory.appendingPathComponent("sign-\(UUID()).wasm").path
        let build = try runPeer(clang, ["--target=wasm32-wasi", "-O2", "-mexec-model=reactor", "-Wl,--strip-all", "-o", built,
                                        sources.appendingPathComponent("sign.c").path])
        #expect(build.status == 0, "\(build.err)")
        // The example config's module is this source's build, byte for byte.
        let committed = try Data(contentsOf: sources.appendingPathComponent("sign.wasm"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: built)) == committed, "config/examples/filters/sign.wasm is stale: rebuild it")
        let upstream = RecordingUpstream()
        let port = try await upstream.start()
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            upstreams: {orders: {url: http://127.0.0.1:\(port)}}
            filters: {sign: {wasm: \(built), configuration: k1\(engine.key)}}
            routes: [{name: orders, upstream: orders, filters: [sign]}]
            """)
        #expect(try curl(["-s", "-o", "/dev/null", "-w", "%{http_code}", "\(gateway.base)/orders/7"]).text == "200")
        #expect(try curl(["-s", "-o", "/dev/null", "-w", "%{http_code}", "--http2-prior-knowledge", "-X", "DELETE",
                          "\(gateway.base)/orders/8?force=1"]).text == "200")
        func fnv(_ text: String) -> String {
            var hash: UInt64 = 0xcbf29ce484222325
            for byte in text.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100000001b3 }
            return String(hash, radix: 16).leftPadded(to: 16)
        }
        #expect(upstream.requests.map { $0.header("x-signature") } == [[fnv("k1GET /orders/7")], [fnv("k1DELETE /orders/8?force=1")]])
    }
}

extension String {
    func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
