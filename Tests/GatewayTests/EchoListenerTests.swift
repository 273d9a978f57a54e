import Foundation
import Testing
@testable import Gateway

/// The default config served on a real socket (port 0), called with curl.
@Suite(.ownThreads) struct EchoListenerTests {
    @Test func defaultConfigAnswersThroughEcho() async throws {
        var config = try ConfigLoader.load(file: ConfigFilesTests.root.appendingPathComponent("config/gatewayd.yaml").path).config
        config.listeners[0].address.port = 0
        let server = GatewayServer(config: config, threads: 1)
        Teardown.register { try? await server.shutdown() }
        let port = try #require(try await server.start().first?.port)
        let base = "http://127.0.0.1:\(port)"
        // What GET /upstreams shows: the built-in echo, which the default config's routes use.
        #expect(server.upstreamsJSON() == #"[{"name":"echo","built_in":true,"endpoints":[]}]"#)

        let search = try curl(["\(base)/search", "-H", "Content-Type: application/json", "-H", "Cookie: s=1", "-H", "X-Request-Id: req-1",
                               "-d", #"{"keywords":"swift nio","since":"2024-05-01T00:00:00Z"}"#]).text
        #expect(search == #"{"method":"GET","path":"/v1/search","query":"q=swift%20nio&order=desc&since=1714521600000&version=2","headers":[["Host","echo"],["User-Agent","test-agent"],["Accept","*/*"],["X-Request-Id","req-1"],["X-Forwarded-For","127.0.0.1"],["X-Forwarded-Proto","http"],["X-Forwarded-Host","127.0.0.1:\#(port)"],["X-Api-Key","demo-key"]],"body":null}"# + "\n")

        let form = try curl(["\(base)/orders", "-H", "Content-Type: application/json", "-d", #"{"item":"A 1","qty":"2"}"#]).text
        #expect(form.contains(#""path":"/legacy/order.php""#))
        #expect(form.contains(#"["Content-Type","application/x-www-form-urlencoded"],["Content-Length","14"]],"body":"item=A+1&qty=2"}"#))

        let unsupported = try curl(["-i", "\(base)/orders", "-H", "Content-Type: text/xml", "-d", "<order/>"]).text
        #expect(unsupported.hasPrefix("HTTP/1.1 415 Unsupported Media Type\r\n"))
        #expect(unsupported.contains(#""type":"urn:gatewayd:problem:unsupported-body""#))
        #expect(unsupported.contains(#""route":"orders""#))

        let notFound = try curl(["-i", "\(base)/nothing"]).text
        #expect(notFound.hasPrefix("HTTP/1.1 404 Not Found\r\n"))
        #expect(notFound.hasSuffix(#"{"type":"urn:gatewayd:problem:no-route","title":"No route matches","status":404,"detail":"no route matches GET /nothing"}"#))

        let big = FileManager.default.temporaryDirectory.appendingPathComponent("big-\(getpid()).json")
        try Data(repeating: UInt8(ascii: "x"), count: 1_048_577).write(to: big)
        defer { try? FileManager.default.removeItem(at: big) }
        let tooLarge = try curl(["-i", "\(base)/orders", "-H", "Content-Type: application/json", "--data-binary", "@\(big.path)"]).text
        #expect(tooLarge.hasPrefix("HTTP/1.1 413 "))
        #expect(tooLarge.contains(#""detail":"the body is larger than this gateway accepts (1048576 bytes)""#))
    }

    @Test func ipv6Listener() async throws {
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: "[::1]:0"}]
            routes: [{name: echo, upstream: echo}]
            """)
        let result = try curl(["-g", "http://[::1]:\(gateway.port)/v6?x=1", "-H", "X-Request-Id: v6"])
        #expect(result.text.hasPrefix(#"{"method":"GET","path":"/v6","query":"x=1","headers":[["Host","echo"]"#))
        #expect(result.text.contains(#"["X-Forwarded-For","::1"]"#))
    }
}
