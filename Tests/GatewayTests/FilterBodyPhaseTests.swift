import Foundation
import Testing
@testable import Gateway

/// Body-reading filters in the shapes the Proxy-Wasm SDKs give them
/// (proxy-wasm-go-sdk's and proxy-wasm-rust-sdk's body examples), on both
/// engines and both protocols: what reached the upstream's socket and what
/// the client got. The host hands a body whole, with end_of_stream set.
@Suite(.ownThreads) struct FilterBodyPhaseTests {
    enum Shape: String, CaseIterable, CustomTestStringConvertible {
        /// The SDKs' standard inspection: content-length removed from the
        /// head, Pause until end_of_stream, then the body read and Continue.
        case pauseUntilTheEnd
        /// Pause returned, but the stream continued inside the same callback.
        case pauseAndContinueAtOnce
        /// Continue on every chunk, the body read as it is.
        case continueEarly
        /// proxy-wasm-rust-sdk's request-body example: Pause on headers while
        /// a body is to come, then Pause until end_of_stream, then Continue.
        case pauseHeadersForTheBody
        var testDescription: String { rawValue }
    }

    static func module(_ shape: Shape) -> String {
        // Request maps and buffers are type 0, the response's 2 and 1.
        func phase(_ callback: String, map: Int, buffer: Int) -> String {
            let body: String = switch shape {
            case .pauseUntilTheEnd: """
                (if (i32.eqz (local.get 2)) (then (return (i32.const 1))))
                (drop (call $get (i32.const \(buffer)) (i32.const 0) (local.get 1) (i32.const 16) (i32.const 20)))
                (drop (call $log (i32.const 2) (i32.const 300) (i32.const 11)))
                (i32.const 0)
                """
            case .pauseAndContinueAtOnce: """
                (drop (call $get (i32.const \(buffer)) (i32.const 0) (local.get 1) (i32.const 16) (i32.const 20)))
                (drop (call $continue (i32.const \(map == 0 ? 0 : 1))))
                (i32.const 1)
                """
            case .continueEarly: "(i32.const 0)"
            case .pauseHeadersForTheBody: """
                (if (i32.eqz (local.get 2)) (then (return (i32.const 1))))
                (drop (call $get (i32.const \(buffer)) (i32.const 0) (local.get 1) (i32.const 16) (i32.const 20)))
                (i32.const 0)
                """
            }
            let headers = shape == .pauseHeadersForTheBody ? "(if (i32.eqz (local.get 2)) (then (return (i32.const 1))))" : ""
            return """
                (func (export "proxy_on_\(callback)_headers") (param i32 i32 i32) (result i32)
                  \(headers)
                  (drop (call $remove (i32.const \(map)) (i32.const 100) (i32.const 14)))
                  (i32.const 0))
                (func (export "proxy_on_\(callback)_body") (param i32 i32 i32) (result i32)
                  \(body))
                """
        }
        return WasmFilter.wat(
            imports: """
                (import "env" "proxy_remove_header_map_value" (func $remove (param i32 i32 i32) (result i32)))
                (import "env" "proxy_get_buffer_bytes" (func $get (param i32 i32 i32 i32 i32) (result i32)))
                (import "env" "proxy_continue_stream" (func $continue (param i32) (result i32)))
                (import "env" "proxy_log" (func $log (param i32 i32 i32) (result i32)))
                """,
            data: #"(data (i32.const 100) "content-length") (data (i32.const 300) "end of body")"#,
            phase("request", map: 0, buffer: 0) + "\n" + phase("response", map: 2, buffer: 1))
    }

    @Test(arguments: Shape.allCases, FilterTests.Engine.allCases)
    func aBodyReadingFilterLetsTheCallThroughWithItsBodyAndLength(_ shape: Shape, _ engine: FilterTests.Engine) async throws {
        try await Teardown.scope {
            let upstream = RecordingUpstream { _ in .respond(status: 200, headers: [("Content-Type", "text/plain")], body: Array("answered, 18 bytes".utf8)) }
            let port = try await upstream.start()
            let gateway = try await GatewayHarness.start(try FilterTests.config(
                [("inspect", Self.module(shape), "")], routes: "  - {name: app, upstream: app, filters: [inspect]}",
                upstreams: "  app: {url: http://127.0.0.1:\(port)}", engine: engine)
                .replacingOccurrences(of: "listeners: [{address: 127.0.0.1:0}]", with: "listeners: [{address: 127.0.0.1:0, protocols: [http1, h2c]}]"))
            for http2 in [false, true] {
                let answer = try curl((http2 ? ["--http2-prior-knowledge"] : ["--http1.1"])
                    + ["-i", "-H", "Content-Type: text/plain", "--data-binary", "0123456789", "\(gateway.base)/items"])
                #expect(answer.status == 0, "curl: \(answer.err)")
                #expect(answer.text.lowercased().contains("content-length: 18\r\n") && answer.text.hasSuffix("\r\n\r\nanswered, 18 bytes"), "\(answer.text)")
            }
            let requests = upstream.requests
            #expect(requests.count == 2)
            #expect(requests.allSatisfy { String(decoding: $0.body, as: UTF8.self) == "0123456789" && $0.header("Content-Length") == ["10"] })
        }
    }
}
