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

    /// A listener whose protocols change on its own address: the reload is
    /// refused saying so (not "in use by another process"), and the old
    /// listener serves on. At start, every address that cannot be used is named.
    @Test func whatAListenerCannotDoIsSaidForEachAddress() async throws {
        let port = freeLoopbackPort()
        let server = GatewayServer(config: try config([port], version: "a"), threads: 1)
        Teardown.register { try? await server.shutdown() }
        _ = try await server.start()
        let changed = try ConfigLoader.load(yaml: """
            listeners: [{address: 127.0.0.1:\(port), protocols: [h2c]}]
            routes: [{name: vb, upstream: echo}]
            """).config
        do {
            try await server.reload(changed)
            Issue.record("the reload was taken")
        } catch {
            #expect("\(error)".contains("listeners[0] 127.0.0.1:\(port): its protocols or TLS changed"), "\(error)")
        }
        #expect(try version(at: port) == "a")

        let (one, two) = (try await GatewayHarness.start("listeners: [{address: 127.0.0.1:0}]"), try await GatewayHarness.start("listeners: [{address: 127.0.0.1:0}]"))
        let busy = GatewayServer(config: try config([one.port, freeLoopbackPort(), two.port], version: "x"), threads: 1)
        Teardown.register { try? await busy.shutdown() }
        do {
            _ = try await busy.start()
            Issue.record("started on busy ports")
        } catch {
            #expect("\(error)".contains("127.0.0.1:\(one.port) is already in use") && "\(error)".contains("127.0.0.1:\(two.port) is already in use"), "\(error)")
        }
    }

    @Test func portZeroListenersAreToldApartByPosition() async throws {
        let server = GatewayServer(config: try config([0, 0], version: "a"), threads: 1)
        Teardown.register { try? await server.shutdown() }
        let addresses = try await server.start()
        #expect(addresses.count == 2 && addresses[0].port != addresses[1].port)
        try await server.reload(try config([0, 0], version: "b"))
        for address in addresses { #expect(try version(at: address.port!) == "b") }
    }

    /// A reload that fails keeps the store the serving routes use open; one
    /// that succeeds with another store closes the old one.
    @Test func aFailedReloadKeepsTheStoreInUse() async throws {
        let redis = try RedisServer()
        let port = freeLoopbackPort()
        let yaml = { (store: String, ports: [Int]) in """
            listeners: [\(ports.map { "{address: 127.0.0.1:\($0)}" }.joined(separator: ", "))]
            store: {redis: {url: "\(store)"}}
            routes: [{name: fleet, upstream: echo, rate_limit: {requests: 1000, per: 1s, scope: fleet, lease: 1}}]
            """ }
        let server = GatewayServer(config: try ConfigLoader.load(yaml: yaml(redis.url, [port])).config, threads: 1)
        Teardown.register { try? await server.shutdown() }
        _ = try await server.start()
        // Scripts run: an EVALSHA refused with NOSCRIPT (another test's server loaded the script first, so its SHA was
        // tried here) counts as a call and a failed call.
        let scripts = {
            try redis.cli(["INFO", "commandstats"]).matches(of: /cmdstat_eval(?:sha)?:calls=(\d+),.*failed_calls=(\d+)/)
                .reduce(0) { $0 + Int($1.1)! - Int($1.2)! }
        }
        #expect(try curl(["-s", "-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(port)/x"]).text == "200")
        #expect(try await eventually(timeout: 30) { try scripts() == 1 })

        // Another store, and a listener that cannot bind: the reload fails.
        let taken = try await GatewayHarness.start("listeners: [{address: 127.0.0.1:0}]\nroutes: [{name: x, upstream: echo}]")
        // Bound, never listening, held to the end: no other test's server can be there.
        let nobody = loopbackSocket()
        defer { close(nobody.fd) }
        let elsewhere = "redis://127.0.0.1:\(nobody.port)/0"
        await #expect(throws: StartupError.self) {
            try await server.reload(try ConfigLoader.load(yaml: yaml(elsewhere, [port, taken.port])).config)
        }
        // The routes still serving still use the first store.
        #expect(try curl(["-s", "-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(port)/x"]).text == "200")
        #expect(try await eventually(timeout: 30) { try scripts() == 2 })
        #expect(server.storeJSON().contains("\"address\":\"127.0.0.1:\(redis.port)\""))
    }
}
