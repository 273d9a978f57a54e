import Foundation
import Testing
@testable import Gateway

/// gatewayd's own HTTP/1.1 codec against real sockets: answers framed every
/// way an upstream frames them reach curl whole, and requests reach the
/// upstream as exact bytes.
@Suite(.ownThreads) struct HTTP1WireTests {
    static func withRawGateway(_ body: (GatewayHarness, RawUpstream) async throws -> Void) async throws {
        let upstream = RawUpstream { line in
            switch line.split(separator: " ")[1] {
            case "/close": .init("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close", close: true)
            case "/chunked": .init("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n")
            case "/lf": .init("HTTP/1.1 200 OK\nContent-Length: 2\n\nok")
            case "/continue": .init("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nx")
            case "/bad": .init("HTTP/1.1 2000 Nope\r\n\r\n")
            case "/upgrade": .init("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
            case "/head": .init("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")
            // These leave their socket open: only what they say ends the connection.
            case "/says-close": .init("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: Keep-Alive, Close\r\n\r\nok")
            case "/http10": .init("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
            case "/http10-kept": .init("HTTP/1.0 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok")
            default: .init("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            }
        }
        let port = try await upstream.start()
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            upstreams: {raw: {url: "http://127.0.0.1:\(port)"}}
            routes: [{name: raw, upstream: raw}]
            """)
        try await body(gateway, upstream)
    }

    @Test func answersFramedEveryWayReachTheClientWhole() async throws {
        try await Self.withRawGateway { gateway, upstream in
            // Read until the upstream closed: re-framed in chunks for HTTP/1.1 ...
            let chunked = try rawExchange(port: gateway.port, Array("GET /close HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n".utf8))
            #expect(chunked.hasPrefix("HTTP/1.1 200 OK\r\n"))
            #expect(chunked.contains("\r\nTransfer-Encoding: chunked\r\n"))
            #expect(chunked.hasSuffix("\r\n\r\nb\r\nuntil close\r\n0\r\n\r\n"))
            // ... and delimited by closing for HTTP/1.0, which has no chunks.
            let http10 = try rawExchange(port: gateway.port, Array("GET /close HTTP/1.0\r\n\r\n".utf8))
            #expect(http10.hasPrefix("HTTP/1.1 200 OK\r\n"))
            #expect(http10.contains("\r\nConnection: close\r\n") && !http10.contains("Transfer-Encoding"))
            #expect(http10.hasSuffix("\r\n\r\nuntil close"))
            #expect(try curl(["--http1.0", "\(gateway.base)/close"]).text == "until close")

            #expect(try curl(["\(gateway.base)/chunked"]).text == "hello world")
            #expect(try curl(["\(gateway.base)/lf"]).text == "ok")
            let interim = try curl(["-i", "\(gateway.base)/continue"]).text
            #expect(interim.hasPrefix("HTTP/1.1 201 Created\r\n") && interim.hasSuffix("\r\n\r\nx"))
            let bad = try curl(["-i", "\(gateway.base)/bad"]).text
            #expect(bad.hasPrefix("HTTP/1.1 502 Bad Gateway\r\n"))
            #expect(bad.contains("urn:gatewayd:problem:upstream-reset") && bad.contains("malformed response"))
            // An upgrade the route does not allow never reaches the upstream.
            let refused = try curl(["-i", "\(gateway.base)/upgrade", "-H", "Upgrade: websocket", "-H", "Connection: Upgrade"]).text
            #expect(refused.hasPrefix("HTTP/1.1 400 ") && refused.contains("urn:gatewayd:problem:upgrade-not-allowed"))
            // An upstream that switches protocols unasked: 502, nothing tunnelled.
            let upgrade = try curl(["-i", "\(gateway.base)/upgrade"]).text
            #expect(upgrade.hasPrefix("HTTP/1.1 502 Bad Gateway\r\n") && upgrade.contains("switched protocols"))

            // A response to HEAD has no body whatever its length says; one
            // that announces a body may still be followed by it (a broken
            // upstream), so the next call goes on another connection.
            let head = try curl(["-I", "\(gateway.base)/head"]).text
            #expect(head.hasPrefix("HTTP/1.1 200 OK\r\n") && head.contains("Content-Length: 5\r\n"))
            #expect(try curl(["\(gateway.base)/plain"]).text == "ok")
            let requests = upstream.requests
            let byTarget = Dictionary(requests.map { ($0.text.split(separator: " ")[1], $0.connection) }) { first, _ in first }
            #expect(byTarget["/head"] != nil && byTarget["/plain"] != nil && byTarget["/head"] != byTarget["/plain"])
            // A connection whose answer ended by closing, or was malformed, is never reused.
            let ends = requests.indices.filter { index in ["GET /close ", "GET /bad ", "GET /upgrade "].contains { requests[index].text.hasPrefix($0) } }
            #expect(ends.count == 5)
            // The upstream was never asked for an upgrade.
            #expect(requests.contains { $0.text.hasPrefix("GET /upgrade ") && !$0.text.lowercased().contains("upgrade: websocket") })
            for end in ends {
                #expect(!requests[(end + 1)...].contains { $0.connection == requests[end].connection })
            }

            // HTTP/1.0 keeps the connection only when asked, and is told so.
            let kept = try rawExchange(port: gateway.port, Array(
                "GET /plain HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /plain HTTP/1.0\r\n\r\n".utf8))
            let answers = kept.components(separatedBy: "HTTP/1.1 200 OK\r\n")
            #expect(answers.count == 3 && answers[1].contains("Connection: keep-alive\r\n") && answers[1].hasSuffix("\r\n\r\nok"))
            #expect(answers.count == 3 && !answers[2].contains("Connection: keep-alive") && answers[2].hasSuffix("\r\n\r\nok"))
        }
    }

    /// RFC 9112 §9.3: `Connection: close`, or an HTTP/1.0 answer that did
    /// not ask to keep the connection, ends it after this answer.
    @Test func answersThatEndTheirConnectionAreNotReused() async throws {
        try await Self.withRawGateway { gateway, upstream in
            for target in ["/says-close", "/http10", "/http10-kept"] {
                #expect(try curl(["\(gateway.base)\(target)"]).text == "ok")
                #expect(try curl(["\(gateway.base)/plain"]).text == "ok")
            }
            let connections = upstream.requests.map(\.connection)
            try #require(connections.count == 6)
            #expect(connections[1] != connections[0])
            #expect(connections[3] != connections[2])
            #expect(connections[5] == connections[4])
        }
    }

    @Test func requestsReachTheUpstreamAsExactBytes() async throws {
        try await Self.withRawGateway { gateway, upstream in
            _ = try curl(["\(gateway.base)/get", "-H", "X-Request-Id: r-1"])
            _ = try curl(["\(gateway.base)/post", "-d", "hello"])
            _ = try curl(["-X", "POST", "\(gateway.base)/empty"])
            // A streamed upload without a length goes upstream in chunks.
            let upload = Array((0..<300_000).map { UInt8(truncatingIfNeeded: $0 % 251) })
            _ = try runPeer("/usr/bin/curl", ["-s", "--max-time", "10", "-T", "-", "\(gateway.base)/upload"], stdin: upload)

            let requests = upstream.requests.map(\.text)
            try #require(requests.count == 4)
            #expect(requests[0].hasPrefix("GET /get HTTP/1.1\r\nHost: 127.0.0.1:"))
            #expect(requests[0].contains("\r\nX-Request-Id: r-1\r\n") && requests[0].hasSuffix("\r\n\r\n"))
            #expect(!requests[0].contains("Content-Length") && !requests[0].contains("Transfer-Encoding"))
            #expect(requests[1].hasPrefix("POST /post HTTP/1.1\r\n") && requests[1].contains("\r\nContent-Length: 5\r\n"))
            #expect(requests[1].hasSuffix("\r\n\r\nhello"))
            #expect(requests[2].hasPrefix("POST /empty HTTP/1.1\r\n") && requests[2].contains("\r\nContent-Length: 0\r\n"))
            #expect(requests[2].hasSuffix("\r\n\r\n"))

            let raw = upstream.requests[3].bytes
            let headEnd = try #require(raw.firstRange(of: Array("\r\n\r\n".utf8)))
            let head = String(decoding: raw[..<headEnd.lowerBound], as: UTF8.self)
            #expect(head.hasPrefix("PUT /upload HTTP/1.1\r\n") && head.contains("\r\nTransfer-Encoding: chunked"))
            #expect(try Self.dechunk(Array(raw[headEnd.upperBound...])) == upload)
        }
    }

    /// Chunked framing undone by hand, strictly: sizes, CRLFs, the last chunk.
    static func dechunk(_ bytes: [UInt8]) throws -> [UInt8] {
        struct Bad: Error {}
        var body: [UInt8] = [], at = 0
        while true {
            guard let lineEnd = bytes[at...].firstRange(of: Array("\r\n".utf8)),
                let size = Int(String(decoding: bytes[at..<lineEnd.lowerBound], as: UTF8.self), radix: 16)
            else { throw Bad() }
            at = lineEnd.upperBound
            if size == 0 { return bytes[at...].elementsEqual("\r\n".utf8) ? body : [] }
            guard at + size + 2 <= bytes.count, bytes[(at + size)..<(at + size + 2)].elementsEqual("\r\n".utf8) else { throw Bad() }
            body += bytes[at..<(at + size)]
            at += size + 2
        }
    }
}
