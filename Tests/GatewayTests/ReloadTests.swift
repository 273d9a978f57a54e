import Foundation
import Testing
@testable import Gateway

/// `GatewayServer.reload` in process: routes swap, listeners are kept, added
/// and removed as the new config says.
@Suite(.ownThreads) struct ReloadTests {
    private func config(_ ports: [Int], version: String) throws -> GatewayConfig {
        let listeners = ports.map { "{address: 127.0.0.1:\($0)}" }.joined(separator: ", ")
        return try ConfigLoader.load(yaml: """
            listeners: [\(listeners)]
            routes: [{name: v\(version), upstream: echo, response_headers: {set: {X-Version: "\(version)"}}}]
            """).config
    }

    private func version(at port: Int) throws -> String? {
        let out = try curl(["-s", "-D", "-", "-o", "/dev/null", "http://127.0.0.1:\(port)/x"])
        guard out.status == 0 else { return nil }
        return out.text.split(separator: "\r\n").first { $0.lowercased().hasPrefix("x-version:") }.map { String($0.dropFirst(11)) }
    }

    @Test func listenersAreKeptAddedAndRemoved() async throws {
        let (first, second) = (freeLoopbackPort(), freeLoopbackPort())
        let server = GatewayServer(config: try config([first], version: "a"), threads: 1)
        Teardown.register { try? await server.shutdown() }
        _ = try await server.start()
        #expect(try version(at: first) == "a")

        try await server.reload(try config([first, second], version: "b"))
        #expect(try version(at: first) == "b")  // kept its socket, new routes
        #expect(try version(at: second) == "b")  // bound

        try await server.reload(try config([second], version: "c"))
        #expect(try version(at: second) == "c")
        // Removed: its socket closes (asynchronously).
        #expect(try await eventually(timeout: 10) { try curl(["http://127.0.0.1:\(first)/x"]).status == 7 })

        // A reload that cannot bind changes nothing.
        let taken = try await GatewayHarness.start("listeners: [{address: 127.0.0.1:0}]\nroutes: [{name: x, upstream: echo}]")
        await #expect(throws: StartupError.self) { try await server.reload(try config([second, taken.port], version: "d")) }
        #expect(try version(at: second) == "c")
    }

    @Test func portZeroListenersAreToldApartByPosition() async throws {
        let server = GatewayServer(config: try config([0, 0], version: "a"), threads: 1)
        Teardown.register { try? await server.shutdown() }
        let addresses = try await server.start()
        #expect(addresses.count == 2 && addresses[0].port != addresses[1].port)
        try await server.reload(try config([0, 0], version: "b"))
        for address in addresses { #expect(try version(at: address.port!) == "b") }
    }
}
