import CNGHTTP2
import Foundation
import Testing
@testable import Gateway

/// Inputs an attacker would send, on the wire against a real upstream
/// socket: each is refused (and what reached the upstream is checked), and
/// the daemon answers a normal call right after.
@Suite struct AdversarialWireTests {
    /// A raw upstream that answers every request with "ok".
    static func upstream() -> RawUpstream {
        RawUpstream { _ in .init("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") }
    }

    static func gateway(_ port: Int, extra: String = "") async throws -> GatewayHarness {
        try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            limits: {header_timeout: 1s, max_header_bytes: 4096}
            upstreams: {app: {url: "http://127.0.0.1:\(port)"}}
            routes:
              - {name: rewrite, match: {prefix: /rw}, upstream: app, rewrite: {encoding: json}}
              - {name: app, upstream: app}
            \(extra)
            """)
    }

    /// A normal call on a new connection still gets its answer.
    static func normalCall(_ gateway: GatewayHarness) throws -> Bool {
        try curl(["-s", "--max-time", "5", "\(gateway.base)/normal"]).text == "ok"
    }

    /// Requests a lenient parser could read two ways: each body ends with a
    /// complete second request, GET /SMUGGLED, that must never reach the upstream.
    static let smuggling: [(String, String)] = [
        ("CL.TE", "Content-Length: 6\r\nTransfer-Encoding: chunked"),
        ("TE.CL", "Transfer-Encoding: chunked\r\nContent-Length: 3"),
        ("TE list", "Transfer-Encoding: chunked, identity"),
        ("TE obfuscated", "Transfer-Encoding: xchunked"),
        ("TE twice", "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked"),
        ("TE folded", "Transfer-Encoding:\r\n chunked"),
        ("TE with space before colon", "Transfer-Encoding : chunked"),
        ("CL signed", "Content-Length: +6"),
        ("CL differing", "Content-Length: 6\r\nContent-Length: 7"),
        ("CL list differing", "Content-Length: 6, 7"),
        ("CL hex", "Content-Length: 0x6"),
        ("CL with space before colon", "Content-Length : 6"),
        ("TE with tab", "Transfer-Encoding:\tchunked\r\nContent-Length: 6"),
    ]

    @Test func smugglingPayloadsOverHTTP1NeverReachTheUpstream() async throws {
        let upstream = Self.upstream()
        let gateway = try await Self.gateway(try await upstream.start())
        defer { Task { await gateway.stop(); await upstream.stop() } }
        let smuggled = "GET /SMUGGLED HTTP/1.1\r\nHost: a\r\n\r\n"
        for (name, fields) in Self.smuggling {
            let request = "POST /x HTTP/1.1\r\nHost: a\r\n\(fields)\r\n\r\n0\r\n\r\n\(smuggled)"
            let answer = try rawExchange(port: gateway.port, Array(request.utf8), timeout: 5)
            let status = Int(answer.dropFirst(9).prefix(3)) ?? 0
            #expect((400..<600).contains(status), "\(name): \(answer.prefix(80))")
            #expect(answer.components(separatedBy: "HTTP/1.1 ").count == 2, "\(name): one answer, then the connection closes")
        }
        // Bare LF line ends: 400. A bare CR where the request line should end
        // is no HTTP/1.x request line at all: the shared port reads it as HTTP/2 (GOAWAY).
        let bareLF = try rawExchange(port: gateway.port, Array("POST /x HTTP/1.1\nHost: a\nContent-Length: 0\n\n\(smuggled)".utf8), timeout: 5)
        #expect(bareLF.hasPrefix("HTTP/1.1 400 "))
        let bareCR = try rawExchangeBytes(port: gateway.port, Array("GET /x HTTP/1.1\rHost: a\r\n\r\n\(smuggled)".utf8), timeout: 5)
        #expect(SharedPortAndTargetTests.frames(bareCR).contains { $0.type == 0x7 })
        #expect(upstream.requests.isEmpty, "\(upstream.requests.map(\.text))")
        #expect(try Self.normalCall(gateway))
    }

    @Test func smugglingFieldsOverHTTP2ResetTheirStreamAndNeverReachTheUpstream() async throws {
        let upstream = Self.upstream()
        let gateway = try await Self.gateway(try await upstream.start())
        defer { Task { await gateway.stop(); await upstream.stop() } }
        let client = try NGHTTP2Client(port: gateway.port)
        let base = [(":method", "POST"), (":path", "/x"), (":scheme", "http"), (":authority", "a")]
        let payloads: [[(String, String)]] = [
            base + [("transfer-encoding", "chunked")],
            base + [("content-length", "6"), ("content-length", "7")],
            base + [("content-length", "+6")],
            base + [("connection", "keep-alive")],
            base + [("te", "gzip")],
            base + [("host", "a\r\nx: y")],
            [(":method", "GET"), (":path", "/x HTTP/1.1\r\nHost: b"), (":scheme", "http"), (":authority", "a")],
        ]
        var stream: UInt32 = 1
        for block in payloads {
            let body = Array("0\r\n\r\nGET /SMUGGLED HTTP/1.1\r\nHost: a\r\n\r\n".utf8)
            client.sendRaw(NGHTTP2Client.frame(type: 0x1, flags: 0x4, stream: stream, payload: client.encodeHeaderBlock(block))
                + NGHTTP2Client.frame(type: 0x0, flags: 0x1, stream: stream, payload: body))
            let id = stream
            client.readRaw(seconds: 5) { $0.rawFrames.contains { $0.type == 0x3 && $0.stream == id } || $0.goAwayCode != nil }
            #expect(client.rawFrames.contains { $0.type == 0x3 && $0.stream == id && $0.errorCode == NGHTTP2_PROTOCOL_ERROR.rawValue },
                    "\(block)")
            stream += 2
        }
        #expect(client.goAwayCode == nil, "each malformed request resets its own stream only")
        #expect(upstream.requests.isEmpty, "\(upstream.requests.map(\.text))")
        #expect(try Self.normalCall(gateway))
    }

    @Test func floodsEndInGoAwayAndTheDaemonServesOn() async throws {
        let upstream = Self.upstream()
        let gateway = try await Self.gateway(try await upstream.start())
        defer { Task { await gateway.stop(); await upstream.stop() } }
        let request = [(":method", "POST"), (":path", "/x"), (":scheme", "http"), (":authority", "a")]
        // Frames that cost the client nothing: each flood ends in GOAWAY(ENHANCE_YOUR_CALM).
        let counted: [(String, (NGHTTP2Client) -> [UInt8])] = [
            ("empty DATA", { client in
                NGHTTP2Client.frame(type: 0x1, flags: 0x4, stream: 1, payload: client.encodeHeaderBlock(request))
                    + (0..<10_000).flatMap { _ in NGHTTP2Client.frame(type: 0x0, flags: 0, stream: 1, payload: []) }
            }),
            ("CONTINUATION", { client in
                NGHTTP2Client.frame(type: 0x1, flags: 0x1, stream: 1, payload: client.encodeHeaderBlock(request))
                    + (0..<10_000).flatMap { _ in NGHTTP2Client.frame(type: 0x9, flags: 0, stream: 1, payload: [0x40, 0x01, 0x78, 0x01, 0x79]) }
            }),
        ]
        for (name, flood) in counted {
            let client = try NGHTTP2Client(port: gateway.port)
            client.sendRaw(flood(client))
            client.readRaw(seconds: 5) { $0.rawFrames.contains { $0.type == 0x7 } }
            #expect(client.rawFrames.contains { $0.type == 0x7 && $0.errorCode == NGHTTP2_ENHANCE_YOUR_CALM.rawValue }, "\(name)")
            #expect(try Self.normalCall(gateway), "after \(name)")
        }
        // PING and SETTINGS faster than their acknowledgements can go out
        // (the client reads nothing): libnghttp2 counts the queued ACKs.
        for (type, payload) in [(UInt8(0x6), [UInt8](repeating: 1, count: 8)), (0x4, [])] {
            let client = try NGHTTP2Client(port: gateway.port)
            client.sendRaw((0..<20_000).flatMap { _ in NGHTTP2Client.frame(type: type, flags: 0, stream: 0, payload: payload) })
            client.readRaw(seconds: 5) { $0.rawFrames.contains { $0.type == 0x7 } }
            #expect(client.rawFrames.contains { $0.type == 0x7 && $0.errorCode == NGHTTP2_ENHANCE_YOUR_CALM.rawValue }, "frame type \(type)")
            #expect(try Self.normalCall(gateway), "after a flood of frame type \(type)")
        }
        #expect(try Self.normalCall(gateway))
    }

    @Test func slowHeadsTooLargeHeadsAndDeepNestingAreRefused() async throws {
        let upstream = Self.upstream()
        let gateway = try await Self.gateway(try await upstream.start())
        defer { Task { await gateway.stop(); await upstream.stop() } }
        // Slowloris: a head that never completes is cut at header_timeout (1s).
        let started = Date()
        let slow = try rawExchange(port: gateway.port, Array("GET /x HTTP/1.1\r\nHost: a\r\nX-Slow: 1".utf8), timeout: 10)
        #expect(slow.isEmpty && Date().timeIntervalSince(started) < 5)
        // A head past the limits: 431, and the connection closes.
        let big = try rawExchange(port: gateway.port, Array("GET /x HTTP/1.1\r\nHost: a\r\nX-Big: \(String(repeating: "b", count: 20_000))\r\n\r\n".utf8))
        #expect(big.hasPrefix("HTTP/1.1 431 "))
        let many = (0..<500).map { "X-F\($0): v" }.joined(separator: "\r\n")
        #expect(try rawExchange(port: gateway.port, Array("GET /x HTTP/1.1\r\nHost: a\r\n\(many)\r\n\r\n".utf8)).hasPrefix("HTTP/1.1 431 "))
        // JSON nested past 64 levels on a rewrite route: 400 naming the problem.
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        let nested = try curl(["-s", "-i", "-H", "Content-Type: application/json", "--data-binary", #"{"a":\#(deep)}"#, "\(gateway.base)/rw"]).text
        #expect(nested.hasPrefix("HTTP/1.1 400 ") && nested.contains("urn:gatewayd:problem:invalid-json"))
        // A query of 100,000 parameters on a rewrite route is read, not a crash.
        let query = (0..<2000).map { "k\($0)=v" }.joined(separator: "&")
        #expect(try curl(["-s", "-o", "/dev/null", "-w", "%{http_code}", "\(gateway.base)/rw?\(query)"]).text != "000")
        #expect(upstream.requests.allSatisfy { !$0.text.contains("X-Big") })
        #expect(try Self.normalCall(gateway))
    }
}
