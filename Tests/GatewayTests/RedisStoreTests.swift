import Foundation
import Logging
import CoreMetrics
import NIOCore
import NIOPosix
import Testing
@testable import Gateway

/// The Redis store's client: hiredis's encoder and reader (hostile replies
/// included), then against a real redis-server: AUTH, SELECT, scripts and
/// a server that goes away and comes back.
@Suite(.ownThreads) struct RedisStoreTests {
    @Test func commandsAreEncodedAsRESP() {
        var bytes = ByteBuffer()
        RedisCommand.encode(["SET", "k", "", "v\r\n"], into: &bytes)
        #expect(String(buffer: bytes) == "*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n$3\r\nv\r\n\r\n")
    }

    @Test func repliesOfEveryKindAreReadAcrossAnySplit() throws {
        let wire = Array("+OK\r\n-ERR bad\r\n:-42\r\n$3\r\nabc\r\n$-1\r\n*2\r\n*1\r\n:1\r\n$0\r\n\r\n*-1\r\n".utf8)
        let expected: [RedisValue] = [.status("OK"), .error("ERR bad"), .integer(-42), .string(Array("abc".utf8)), .null,
                                      .array([.array([.integer(1)]), .string([])]), .null]
        for chunk in [1, 2, 3, 7, wire.count] {
            let reader = RedisReader()
            var values: [RedisValue] = []
            for start in stride(from: 0, to: wire.count, by: chunk) {
                try wire[start..<min(start + chunk, wire.count)].withUnsafeBytes { try reader.feed($0) }
                while let value = try reader.next() { values.append(value) }
            }
            #expect(values == expected, "fed \(chunk) bytes at a time")
        }
    }

    @Test(arguments: [
        "*1025\r\n",  // more elements than any reply gatewayd asks for
        "*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n",  // nested past hiredis's depth
        "?what\r\n",
        "$abc\r\n",
        ":12x\r\n",
    ])
    func hostileRepliesAreErrorsNotAllocations(_ wire: String) {
        let reader = RedisReader()
        #expect(throws: RedisReader.Failure.self) {
            try Array(wire.utf8).withUnsafeBytes { try reader.feed($0) }
            while try reader.next() != nil {}
        }
    }

    @Test func aReplyLargerThanTheBoundIsRefusedBeforeItIsWhole() {
        let reader = RedisReader()
        let head = Array("$100000000\r\n".utf8) + [UInt8](repeating: 0x61, count: RedisReader.maxBuffered)
        #expect(throws: RedisReader.Failure.self) {
            try head.withUnsafeBytes { try reader.feed($0) }
        }
    }

    private func client(_ url: String, password: String? = nil, caFile: String? = nil, timeout: Duration = .milliseconds(200),
                        on group: any EventLoopGroup) throws -> RedisClient {
        var config = try #require(StoreConfig.parse(url: url))
        config.password = password ?? config.password
        config.caFile = caFile
        config.timeout = timeout
        return try RedisClient(config: config, loop: group.next(), logger: Logger(label: "test"), factory: NOOPMetricsHandler.instance)
    }

    @Test func authSelectAndScriptsOnARealServer() async throws {
        let server = try RedisServer(password: "s3cret")
        let group = MultiThreadedEventLoopGroup.singleton
        let store = try client("redis://:s3cret@127.0.0.1:\(server.port)/3", on: group)
        defer { store.close() }
        #expect(try await store.send(["SET", "k", "v"]).get() == .status("OK"))
        #expect(try server.cli(["-n", "3", "GET", "k"]) == "v\n", "AUTH and SELECT went first on the connection")
        let script = RedisScript("return {tonumber(ARGV[1]) + 1, KEYS[1]}")
        #expect(try await script.run(on: store, keys: ["a"], arguments: ["41"]).get() == .array([.integer(42), .string(Array("a".utf8))]))
        // Loaded by now: run by its SHA, and again after the server forgot it.
        #expect(try await script.run(on: store, keys: ["b"], arguments: ["1"]).get() == .array([.integer(2), .string(Array("b".utf8))]))
        #expect(try server.cli(["SCRIPT", "FLUSH"]) == "OK\n")
        #expect(try await script.run(on: store, keys: ["c"], arguments: ["2"]).get() == .array([.integer(3), .string(Array("c".utf8))]))
        #expect(await eventually(timeout: 5) { store.health == .up })

        let refused = try client("redis://:wrong@127.0.0.1:\(server.port)/0", on: group)
        defer { refused.close() }
        _ = try? await refused.send(["PING"]).get()
        #expect(await eventually(timeout: 5) { refused.health.isDown })
    }

    @Test func rediss() async throws {
        let (certificate, key) = try TLSListenerTests.makeCertificate()
        let server = try RedisServer(tls: (certificate, key))
        let group = MultiThreadedEventLoopGroup.singleton
        let store = try client(server.url, caFile: certificate, on: group)
        defer { store.close() }
        #expect(try await store.send(["SET", "over", "tls"]).get() == .status("OK"))
        #expect(try server.cli(["GET", "over"]) == "tls\n")
        // Not trusted without the CA: the handshake fails and the store is down.
        let untrusting = try client(server.url, on: group)
        defer { untrusting.close() }
        await #expect(throws: (any Error).self) { try await untrusting.send(["PING"]).get() }
        #expect(untrusting.health != .up)
        #expect(await eventually(timeout: 5) { untrusting.health.isDown })
    }

    @Test func aStoppedServerIsDownAtOnceAndUsedAgainOnceBack() async throws {
        let server = try RedisServer()
        let group = MultiThreadedEventLoopGroup.singleton
        let store = try client(server.url, on: group)
        defer { store.close() }
        // Another, down with it and closed meanwhile (as a reload retires one).
        let retired = try client(server.url, on: group)
        #expect(try await store.send(["PING"]).get() == .status("PONG"))
        #expect(try await retired.send(["PING"]).get() == .status("PONG"))
        server.stop()
        await #expect(throws: StoreFailure.self) { try await retired.send(["PING"]).get() }
        retired.close()
        await #expect(throws: StoreFailure.self) { try await store.send(["PING"]).get() }
        let failedAt = ContinuousClock.now
        #expect(store.health.isDown, "down before the caller hears of the failure")
        // Within the backoff (100 ms) a command fails without a connection
        // attempt; a machine too slow to ask again within it asserts nothing here.
        var again: (any Error)?
        do { _ = try await store.send(["PING"]).get() } catch { again = error }
        if ContinuousClock.now - failedAt < .milliseconds(100) {
            #expect((again as? StoreFailure)?.description == "the store is down")
        }
        try server.start()
        #expect(await eventually(timeout: 10) { store.health == .up }, "back by itself after a backoff, no command needed")
        #expect(try await store.send(["PING"]).get() == .status("PONG"))
        // The closed client tried no more: the server sees the store's connection and redis-cli's.
        #expect(retired.health.isDown)
        #expect(try server.cli(["CLIENT", "LIST"]).split(separator: "\n").count == 2)
    }

    @Test func aServerThatNeverAnswersCostsOneTimeout() async throws {
        // A listener that accepts and says nothing.
        let (listener, port) = loopbackSocket(listening: true)
        defer { close(listener) }
        let group = MultiThreadedEventLoopGroup.singleton
        let store = try client("redis://127.0.0.1:\(port)", timeout: .milliseconds(100), on: group)
        defer { store.close() }
        await #expect(throws: StoreFailure.self) { try await store.send(["PING"]).get() }
        #expect(store.health == .down("no reply within 0.1 seconds"))
    }
}
