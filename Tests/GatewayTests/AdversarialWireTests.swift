import CNGHTTP2
import Foundation
import Testing
@testable import Gateway

/// Inputs an attacker would send, on the wire against a real upstream
/// socket: each is refused (and what reached the upstream is checked), and
/// the daemon answers a normal call right after.
@Suite(.ownThreads) struct AdversarialWireTests {
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

/// The upstream side: a legacy upstream that breaks HTTP, recorded byte for
/// byte. Whatever it sends, no other call is touched, and a call reaches it
/// exactly as often as the client sent it.
extension AdversarialWireTests {
    static let ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

    /// Ways an upstream sends bytes no request asked for: `first` is the
    /// answer to the first call (`head`: a HEAD), `later` what follows it 100 ms on.
    static let strayBytes: [(name: String, head: Bool, first: String, later: String)] = [
        ("a HEAD's body 100 ms late", true, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", "hello"),
        ("a HEAD's body in the same segment", true, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", ""),
        ("a HEAD's chunked body 100 ms late", true, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "5\r\nhello\r\n0\r\n\r\n"),
        ("a 204's body 100 ms late", false, "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n", "hello"),
        ("a second answer in the same segment", false, ok + "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray", ""),
        ("a second answer while the connection idles", false, ok, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray"),
        ("bytes past the length in the same segment", false, ok + "xyz", ""),
    ]

    @Test(arguments: [false, true])
    func strayUpstreamBytesNeverReachAnotherCall(http2: Bool) async throws {
        for stray in Self.strayBytes {
            let upstream = RawUpstream { line in
                line.hasPrefix("POST") ? .init(Self.ok) : .init(stray.first, later: stray.later)
            }
            let gateway = try await Self.gateway(try await upstream.start())
            let peer = http2 ? ["--http2-prior-knowledge"] : []
            let first = try await curlDetached(peer + ["-o", "/dev/null", "-w", "%{http_code}"] + (stray.head ? ["-I"] : []) + ["\(gateway.base)/first"])
            #expect(first.text == (stray.first.contains("204") ? "204" : "200"), "\(stray.name)")
            // One call right after the answer (before late bytes come), one after they came.
            let next = try await curlDetached(peer + ["-d", "order=1", "\(gateway.base)/next"])
            // The stray bytes (late ones 100 ms after the answer) make the gateway close that connection.
            let strayConnection = upstream.requests.first { !$0.text.hasPrefix("POST") }?.connection ?? 0
            _ = await eventually(timeout: 5) { upstream.closedConnections.contains(strayConnection) }
            let after = try await curlDetached(peer + ["-d", "order=2", "\(gateway.base)/after"])
            #expect(next.text == "ok" && after.text == "ok", "\(stray.name): \(next.text) / \(after.text)")
            let posts = upstream.requests.filter { $0.text.hasPrefix("POST") }.map { $0.text.components(separatedBy: "\r\n")[0] }
            #expect(posts == ["POST /next HTTP/1.1", "POST /after HTTP/1.1"], "\(stray.name): each call exactly once")
            await gateway.stop()
            await upstream.stop()
        }
    }

    /// A raw upstream that switches to whatever its script says.
    static func switching(to protocolName: String) -> RawUpstream {
        RawUpstream { line in
            line.hasPrefix("GET /chat") ? .init("HTTP/1.1 101 Switching Protocols\r\nUpgrade: \(protocolName)\r\nConnection: Upgrade\r\n\r\n") : .init(ok)
        }
    }

    static func upgradeGateway(_ port: Int) async throws -> GatewayHarness {
        try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            upstreams: {app: {url: "http://127.0.0.1:\(port)"}}
            routes:
              - {name: chat, match: {prefix: /chat}, upstream: app, upgrade: [websocket]}
              - {name: app, upstream: app}
            """)
    }

    @Test func onlyTheRoutesProtocolIsAskedUpstreamAndAnotherSwitchIsA502() async throws {
        for (asked, answered) in [("websocket, h2c", "h2c"), ("websocket", "h2c"), ("websocket", "websocket, h2c")] {
            let upstream = Self.switching(to: answered)
            let gateway = try await Self.upgradeGateway(try await upstream.start())
            let request = "GET /chat HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: \(asked)\r\n"
                + "HTTP2-Settings: AAMAAABkAAQAAP__\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
                + "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
            let answer = try rawExchange(port: gateway.port, Array(request.utf8), timeout: 5)
            #expect(answer.hasPrefix("HTTP/1.1 502 "), "\(asked) -> \(answered): \(answer.prefix(60))")
            #expect(!answer.contains("HTTP/1.1 101"))
            let sent = upstream.requests.map(\.text)
            #expect(sent.count == 1, "\(sent)")
            #expect(sent.first?.contains("\r\nUpgrade: websocket\r\n") == true, "\(sent)")
            #expect(!sent.joined().lowercased().contains("h2c") && !sent.joined().lowercased().contains("http2-settings"))
            #expect(!sent.joined().contains("PRI * HTTP/2.0"), "the preface never reaches the upstream")
            #expect(try Self.normalCall(gateway))
            await gateway.stop()
            await upstream.stop()
        }
    }

    /// RFC 8441: an extended CONNECT for websocket that the upstream answers
    /// with a switch to h2c gets a 502 on its stream, not a tunnel.
    @Test func anExtendedConnectAnsweredWithAnotherProtocolIsA502() async throws {
        let upstream = Self.switching(to: "h2c")
        let gateway = try await Self.upgradeGateway(try await upstream.start())
        let client = try NGHTTP2Client(port: gateway.port)
        client.settle()
        let block = client.encodeHeaderBlock([(":method", "CONNECT"), (":protocol", "websocket"), (":scheme", "http"), (":path", "/chat"),
                                              (":authority", "localhost"), ("sec-websocket-version", "13")])
        client.sendRaw(NGHTTP2Client.frame(type: 0x1, flags: 0x4, stream: 1, payload: block))
        client.readRaw(seconds: 5) { $0.rawFrames.contains { $0.type == 0x0 && $0.stream == 1 && $0.flags & 0x1 != 0 } }
        let problem = String(decoding: client.rawData[1] ?? [], as: UTF8.self)
        #expect(problem.contains("urn:gatewayd:problem:upstream-reset"), "\(problem)")
        #expect(upstream.requests.count == 1 && upstream.requests[0].text.contains("\r\nUpgrade: websocket\r\n"))
    }

    @Test(arguments: [false, true])
    func anAnswerFramedBothWaysIsA502AndItsConnectionIsClosed(http2: Bool) async throws {
        let upstream = RawUpstream { line in
            line.hasPrefix("GET /both")
                ? .init("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n") : .init(Self.ok)
        }
        let gateway = try await Self.gateway(try await upstream.start())
        let peer = http2 ? ["--http2-prior-knowledge"] : []
        let both = try await curlDetached(peer + ["-i", "\(gateway.base)/both"]).text
        #expect(both.hasPrefix(http2 ? "HTTP/2 502 " : "HTTP/1.1 502 ") && both.contains("urn:gatewayd:problem:upstream-reset"), "\(both.prefix(120))")
        #expect(try await curlDetached(peer + ["\(gateway.base)/next"]).text == "ok")
        // Not retried (the upstream may have acted on it); the next call went on a new connection.
        #expect(upstream.requests.map { $0.text.components(separatedBy: "\r\n")[0] } == ["GET /both HTTP/1.1", "GET /next HTTP/1.1"])
        #expect(Set(upstream.requests.map(\.connection)).count == 2)
    }

    /// The edge fields follow the listener's `forwarded.trust`: from an
    /// untrusted peer a client's X-Forwarded-* are replaced (it cannot pick
    /// its scheme, host or address, nor dodge the client-IP rate limit); from
    /// a trusted one they are kept and appended to, and the rate limit reads
    /// the client the proxy names. A client's `Connection` list never strips
    /// what the route injects.
    @Test(arguments: [false, true])
    func forwardedFieldsFollowTheListenersTrust(http2: Bool) async throws {
        try await Teardown.scope {
            let upstream = RecordingUpstream()
            let port = try await upstream.start()
            func gateway(trust: String) async throws -> GatewayHarness {
                try await GatewayHarness.start("""
                    listeners: [{address: 127.0.0.1:0, protocols: [http1, h2c]\(trust)}]
                    upstreams: {app: {url: "http://127.0.0.1:\(port)"}}
                    routes: [{name: app, upstream: app, headers: {set: {X-Api-Key: k-1}}, rate_limit: {requests: 2, per: 60s, burst: 0}}]
                    """)
            }
            let peer = http2 ? ["--http2-prior-knowledge"] : ["--http1.1"]
            let spoof = ["-H", "X-Forwarded-Proto: https", "-H", "X-Forwarded-Host: evil.example", "-H", "Connection: X-Api-Key"]
            let untrusted = try await gateway(trust: "")
            var codes: [String] = []
            for claim in ["203.0.113.1", "203.0.113.2", "203.0.113.3"] {
                codes.append(try curl(peer + spoof + ["-o", "/dev/null", "-w", "%{http_code}", "-H", "X-Forwarded-For: \(claim)", "\(untrusted.base)/x"]).text)
            }
            #expect(codes == ["200", "200", "429"], "a claimed address is no new client")
            let first = try #require(upstream.requests.first)
            #expect(first.header("X-Forwarded-For") == ["127.0.0.1"])
            #expect(first.header("X-Forwarded-Proto") == ["http"])
            #expect(first.header("X-Forwarded-Host") == ["127.0.0.1:\(untrusted.port)"])
            #expect(first.header("X-Api-Key") == ["k-1"])

            // 127.0.0.1 trusted: what it says is kept, and names the client the limit counts.
            let trusted = try await gateway(trust: ", forwarded: {trust: [127.0.0.0/8]}")
            let before = upstream.requests.count
            codes = []
            for claim in ["203.0.113.1", "203.0.113.2", "203.0.113.3"] {
                codes.append(try curl(peer + spoof + ["-o", "/dev/null", "-w", "%{http_code}", "-H", "X-Forwarded-For: \(claim)", "\(trusted.base)/x"]).text)
            }
            #expect(codes == ["200", "200", "200"], "three clients behind a trusted proxy")
            let kept = upstream.requests[before]
            #expect(kept.header("X-Forwarded-For") == ["203.0.113.1, 127.0.0.1"])
            #expect(kept.header("X-Forwarded-Proto") == ["https, http"])
            #expect(kept.header("X-Forwarded-Host") == ["evil.example, 127.0.0.1:\(trusted.port)"])
        }
    }

    @Test func trustedRangesParseAndMatch() {
        let ranges = ["10.0.0.0/8", "::1", "2001:db8::/32", "192.168.1.7"].compactMap(AddressRange.init)
        #expect(ranges.count == 4)
        #expect(ranges.contains(address: "10.2.3.4") && ranges.contains(address: "::1") && ranges.contains(address: "2001:db8:1::5"))
        #expect(ranges.contains(address: "::ffff:10.9.9.9") && ranges.contains(address: "192.168.1.7"))
        #expect(!ranges.contains(address: "11.0.0.1") && !ranges.contains(address: "192.168.1.8") && !ranges.contains(address: "x"))
        for bad in ["10.0.0.0/33", "::/129", "10.0.0/8", "a.b.c.d", "10.0.0.0/-1", ""] { #expect(AddressRange(bad) == nil, "\(bad)") }
        // The client behind trusted proxies: the rightmost entry not trusted.
        #expect(ranges.clientAddress(peer: "10.0.0.1", forwardedFor: ["1.2.3.4, 5.6.7.8", "10.0.0.2"]) == "5.6.7.8")
        #expect(ranges.clientAddress(peer: "10.0.0.1", forwardedFor: ["10.1.1.1"]) == "10.1.1.1")
        #expect(ranges.clientAddress(peer: "10.0.0.1", forwardedFor: ["junk"]) == "10.0.0.1")
        #expect(ranges.clientAddress(peer: "9.9.9.9", forwardedFor: ["1.2.3.4"]) == "9.9.9.9")
    }

    /// RFC 9110 section 6.6.1: an answer without Date gets one on its way; an upstream's own is kept.
    @Test(arguments: [false, true])
    func anAnswerWithoutDateGetsOne(http2: Bool) async throws {
        let upstream = RawUpstream { line in
            line.hasPrefix("GET /dated") ? .init("HTTP/1.1 200 OK\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nContent-Length: 2\r\n\r\nok") : .init(Self.ok)
        }
        let gateway = try await Self.gateway(try await upstream.start())
        let peer = http2 ? ["--http2-prior-knowledge"] : []
        let undated = try await curlDetached(peer + ["-i", "\(gateway.base)/undated"]).text.lowercased()
        #expect(undated.firstMatch(of: /\r\ndate: [a-z]{3}, \d{2} [a-z]{3} \d{4} \d{2}:\d{2}:\d{2} gmt\r\n/) != nil, "\(undated)")
        let dated = try await curlDetached(peer + ["-i", "\(gateway.base)/dated"]).text.lowercased()
        #expect(dated.components(separatedBy: "\r\ndate: ").count == 2 && dated.contains("\r\ndate: sun, 06 nov 1994 08:49:37 gmt\r\n"), "\(dated)")
    }
    /// A fragment in the target is a 400 on both protocols (RFC 9112 §3.2),
    /// and a percent-encoded unreserved character is decoded before routing
    /// (RFC 3986 §6.2.2.2): neither `/login#x` nor `/%6cogin` passes the
    /// `/login` route's limit, and the upstream reads `/login`.
    @Test func fragmentsAreRefusedAndEncodedUnreservedCharactersRouteAsTheirLetters() async throws {
        let upstream = RecordingUpstream()
        let port = try await upstream.start()
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            upstreams: {app: {url: "http://127.0.0.1:\(port)"}}
            routes:
              - {name: login, match: {path: /login}, upstream: app, rate_limit: {requests: 1, per: 60s, burst: 0}}
              - {name: rest, upstream: app}
            """)
        let fragment = try rawExchange(port: gateway.port, Array("GET /login#x HTTP/1.1\r\nHost: a\r\n\r\n".utf8), timeout: 5)
        #expect(fragment.hasPrefix("HTTP/1.1 400 ") && fragment.contains("bad-target"), "\(fragment)")
        let client = try NGHTTP2Client(port: gateway.port)
        let stream = client.submit(method: "GET", path: "/login#x")
        client.run { $0.responses[stream]?.closed == true }
        #expect(client.responses[stream]?.status == "400")
        #expect(upstream.requests.isEmpty)

        let codes = try ["/login", "/%6cogin", "/%6C%6F%67%69%6E"].map {
            try curl(["-o", "/dev/null", "-w", "%{http_code}", "--path-as-is", gateway.base + $0]).text
        }
        #expect(codes == ["200", "429", "429"])
        #expect(upstream.requests.map(\.uri) == ["/login"])
    }
}
