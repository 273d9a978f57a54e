import Foundation
import Testing
@testable import Gateway

/// WebSocket through the gateway between two independent peers (Python
/// `websockets`): the upgrade, echoes both ways, 10 MiB each way with
/// bounded memory, the close handshake, drain with a tunnel open, and an
/// upgrade on a route that does not allow it.
@Suite(.serialized, .ownThreads) struct WebSocketTunnelTests {
    static let peer = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Peers/ws_peer.py").path


    /// The echo server, running until the test ends; its port.
    static func echoServer() throws -> (ChildProcess, Int) {
        // Not the test's own stderr: a peer still running must not hold that pipe open.
        let process = try ChildProcess("/usr/bin/python3", [peer, "server"], output: .pipe, error: .null)
        var line = ""
        _ = eventuallyBlocking(timeout: 10) {
            line += String(decoding: process.output!.availableData, as: UTF8.self)
            return line.contains("\n")
        }
        let port = try #require(Int(line.trimmingCharacters(in: .whitespacesAndNewlines)))
        return (process, port)
    }

    static func gateway(_ upstreamPort: Int, drain: String = "30s") throws -> SpawnedGateway {
        try SpawnedGateway(yaml: """
            listeners: [{address: 127.0.0.1:0}]
            limits: {drain_timeout: \(drain)}
            upstreams: {ws: {url: "http://127.0.0.1:\(upstreamPort)"}}
            routes:
              - {name: chat, match: {prefix: /chat}, upstream: ws, upgrade: [websocket]}
              - {name: plain, match: {prefix: /plain}, upstream: ws}
            """)
    }

    @Test func echoesTenMiBEachWayAndClosesCleanly() async throws {
        let (server, port) = try Self.echoServer()
        defer { server.kill() }
        let gateway = try Self.gateway(port)
        defer { gateway.stop() }
        let result = try runPeer("/usr/bin/python3", [Self.peer, "client", "ws://127.0.0.1:\(gateway.port)/chat", "10"])
        #expect(result.text.contains("ok close=1000"), "\(result.text) \(gateway.log)")
        // 10 MiB each way went through without being held: memory stays near its idle size.
        #expect(try gateway.residentBytes() < 80 << 20)
        // One access line for the tunnel, when it ended: 101, bytes each way.
        _ = await eventually(timeout: 3) { gateway.log.contains("outcome=tunnel-closed") }
        let line = gateway.log.split(separator: "\n").first { $0.contains("outcome=tunnel-closed") } ?? ""
        #expect(line.contains("status=101") && line.contains("route=chat"), "\(line)")
        let sent = line.firstMatch(of: /request_bytes=(\d+)/).flatMap { Int($0.output.1) } ?? 0
        let received = line.firstMatch(of: /\sbytes=(\d+)/).flatMap { Int($0.output.1) } ?? 0
        #expect(sent > 10 << 20 && received > 10 << 20, "\(line)")
    }

    @Test func anUpgradeOnARouteThatDoesNotAllowItIsRefused() throws {
        let (server, port) = try Self.echoServer()
        defer { server.kill() }
        let gateway = try Self.gateway(port)
        defer { gateway.stop() }
        let answer = try curl(["-s", "-i", "-H", "Connection: Upgrade", "-H", "Upgrade: websocket", "-H", "Sec-WebSocket-Version: 13",
                               "-H", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "http://127.0.0.1:\(gateway.port)/plain"]).text
        #expect(answer.hasPrefix("HTTP/1.1 400 "))
        #expect(answer.contains("urn:gatewayd:problem:upgrade-not-allowed"))
        let refused = try runPeer("/usr/bin/python3", [Self.peer, "client", "ws://127.0.0.1:\(gateway.port)/plain"])
        #expect(!refused.text.contains("ok close"))
    }

    /// SIGTERM with a tunnel open: it keeps working while the drain lasts,
    /// then the drain's deadline closes it and the daemon exits.
    @Test func drainWaitsForAnOpenTunnelUpToItsDeadline() throws {
        let (server, port) = try Self.echoServer()
        defer { server.kill() }
        let gateway = try Self.gateway(port, drain: "2s")
        defer { gateway.stop() }
        let holder = try BackgroundPeer("/usr/bin/python3", [Self.peer, "hold", "ws://127.0.0.1:\(gateway.port)/chat", "10"])
        // The tunnel is open (one echo came back) before the drain starts, however slowly python started.
        #expect(holder.waitFor("open", seconds: 30))
        let signalled = Date()
        gateway.signal(SIGTERM)
        let held = holder.finish()
        let echoed = held.firstMatch(of: /echoed=(\d+)/).flatMap { Int($0.output.1) } ?? 0
        let after = held.firstMatch(of: /after=([\d.]+)/).flatMap { Double($0.output.1) } ?? 0
        // Echoes went on during the drain (about 5 a second; fewer on a busy machine), and it ended at its deadline, not at the holder's 10 s.
        #expect(echoed >= 4, "\(held)")
        #expect(after < 6, "\(held)")
        _ = gateway.waitForExit(timeout: 10)
        #expect(Date().timeIntervalSince(signalled) < 8)
    }

    /// RFC 8441 over h2c: an extended CONNECT with `:protocol websocket`
    /// becomes an HTTP/1.1 upgrade to the upstream; the stream's DATA frames
    /// carry the WebSocket frames both ways.
    @Test func anExtendedConnectOverH2cBecomesAnUpgrade() throws {
        let (server, port) = try Self.echoServer()
        defer { server.kill() }
        let gateway = try Self.gateway(port)
        defer { gateway.stop() }
        let client = try NGHTTP2Client(port: gateway.port)
        // SETTINGS both ways first: :protocol is allowed once the gateway's ENABLE_CONNECT_PROTOCOL is acknowledged.
        client.settle()
        let block = client.encodeHeaderBlock([(":method", "CONNECT"), (":protocol", "websocket"), (":scheme", "http"), (":path", "/chat"),
                                              (":authority", "localhost"), ("sec-websocket-version", "13")])
        client.sendRaw(NGHTTP2Client.frame(type: 0x1, flags: 0x4, stream: 1, payload: block))
        client.readRaw(seconds: 5) { $0.rawFrames.contains { $0.type == 0x1 && $0.stream == 1 } }
        #expect(client.rawFrames.contains { $0.type == 0x1 && $0.stream == 1 }, "the 200 that accepts the tunnel")
        #expect(!client.rawFrames.contains { $0.type == 0x3 && $0.stream == 1 })
        // A masked text frame "hello" (RFC 6455 §5.2); the echo comes back unmasked.
        let mask: [UInt8] = [1, 2, 3, 4]
        let masked = Array("hello".utf8).enumerated().map { $1 ^ mask[$0 % 4] }
        client.sendRaw(NGHTTP2Client.frame(type: 0x0, flags: 0, stream: 1, payload: [0x81, 0x85] + mask + masked))
        client.readRaw(seconds: 5) { ($0.rawData[1] ?? []).count >= 7 }
        #expect(client.rawData[1] == [0x81, 0x05] + Array("hello".utf8))
        // A route without upgrade refuses it on its stream.
        let refused = client.encodeHeaderBlock([(":method", "CONNECT"), (":protocol", "websocket"), (":scheme", "http"), (":path", "/plain"),
                                                (":authority", "localhost"), ("sec-websocket-version", "13")])
        client.sendRaw(NGHTTP2Client.frame(type: 0x1, flags: 0x4, stream: 3, payload: refused))
        client.readRaw(seconds: 5) { $0.rawFrames.contains { $0.type == 0x0 && $0.stream == 3 } }
        #expect(String(decoding: client.rawData[3] ?? [], as: UTF8.self).contains("upgrade-not-allowed"))
    }
}
