import Foundation
import Testing
@testable import Gateway

/// What a shared http1+h2c port makes of its first bytes, and which
/// absolute-form targets are this gateway's own.
@Suite(.ownThreads) struct SharedPortAndTargetTests {
    /// The frames (type, error code of a GOAWAY) in `bytes`, as far as they parse.
    static func frames(_ reply: [UInt8]) -> [(type: UInt8, code: UInt32?)] {
        var bytes = reply
        var out: [(UInt8, UInt32?)] = []
        while bytes.count >= 9 {
            let length = Int(bytes[0]) << 16 | Int(bytes[1]) << 8 | Int(bytes[2])
            guard bytes.count >= 9 + length else { break }
            let payload = bytes[9..<(9 + length)]
            let code = bytes[3] == 0x7 && length >= 8 ? payload.dropFirst(4).prefix(4).reduce(0) { $0 << 8 | UInt32($1) } : nil
            out.append((bytes[3], code))
            bytes.removeFirst(9 + length)
        }
        return out
    }

    @Test func bytesThatAreNotAnHTTP1RequestLineGetAGoAway() async throws {
        let gateway = try await GatewayHarness.start("listeners: [{address: 127.0.0.1:0, protocols: [http1, h2c]}]\nroutes: [{name: echo, upstream: echo}]")
        for opening in ["INVALID CONNECTION PREFACE\r\n\r\n", "PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\r"] {
            let reply = try rawExchangeBytes(port: gateway.port, Array(opening.utf8), timeout: 5)
            #expect(!reply.starts(with: "HTTP/1.1".utf8), "\(opening.debugDescription): \(reply)")
            #expect(Self.frames(reply).contains { $0.type == 0x7 && $0.code == 0x1 }, "\(opening.debugDescription): GOAWAY(PROTOCOL_ERROR)")
        }
        // A request line with another version is HTTP/1's to answer: 505 (400 for a name that is not HTTP), never HTTP/2 frames.
        for (version, status) in [("HTTP/3.0", "505"), ("HTTP/2.0", "505"), ("HTTP/0.9", "505"), ("FOO/1.1", "400")] {
            let reply = try rawExchange(port: gateway.port, Array("GET /api/x \(version)\r\nHost: a\r\n\r\n".utf8), timeout: 5)
            #expect(reply.hasPrefix("HTTP/1.1 \(status) "), "\(version): \(reply.debugDescription)")
        }
        // HTTP/1.x request lines are still HTTP/1, whatever their method.
        let http11 = try rawExchange(port: gateway.port, Array("PROPFIND /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n".utf8))
        #expect(http11.hasPrefix("HTTP/1.1 200 OK\r\n"))
        let http10 = try rawExchange(port: gateway.port, Array("GET /y HTTP/1.0\r\n\r\n".utf8))
        #expect(http10.hasPrefix("HTTP/1.1 200 OK\r\n"))
        // Blank lines before the first request line are skipped (RFC 9112 section 2.2), as between requests.
        let blankFirst = try rawExchange(port: gateway.port, Array("\r\n\r\nGET /z HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n".utf8))
        #expect(blankFirst.hasPrefix("HTTP/1.1 200 OK\r\n") && blankFirst.contains("\"path\":\"/z\""), "\(blankFirst)")
        // Only blank lines, as many as a request line may be long: HTTP/1's reader takes them (nothing is held back unread).
        let blanks = try rawExchange(port: gateway.port, Array(String(repeating: "\r\n", count: HTTPVersionDetector.maxLineBytes / 2).utf8) + Array("GET /w HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n".utf8))
        #expect(blanks.hasPrefix("HTTP/1.1 200 OK\r\n") && blanks.contains("\"path\":\"/w\""), "\(blanks)")
    }

    @Test func anAbsoluteFormTargetIsAcceptedForThisGatewayOnly() async throws {
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            routes:
              - {name: named, match: {host: api.internal}, upstream: echo}
              - {name: echo, upstream: echo}
            """)
        func get(_ target: String, host: String = "a") throws -> String {
            try rawExchange(port: gateway.port, Array("GET \(target) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n".utf8))
        }
        let own = try get("http://127.0.0.1:\(gateway.port)/p?q=1")
        #expect(own.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(own.contains(#""path":"/p""#) && own.contains("127.0.0.1:\(gateway.port)"))
        #expect(try get("HTTP://localhost:\(gateway.port)").hasPrefix("HTTP/1.1 200 OK\r\n"))
        let named = try get("http://api.internal/v1", host: "ignored")
        #expect(named.hasPrefix("HTTP/1.1 200 OK\r\n") && named.contains("api.internal"))
        // Not an open proxy.
        for foreign in ["http://example.com/", "http://127.0.0.1:1/", "http://user@127.0.0.1:\(gateway.port)/", "ftp://127.0.0.1/"] {
            let refused = try get(foreign)
            #expect(refused.hasPrefix("HTTP/1.1 400 Bad Request\r\n"), "\(foreign)")
            #expect(refused.contains("urn:gatewayd:problem:bad-target") || refused.contains("malformed"), "\(foreign)")
        }
    }

    @Test func aWrongMethodGets405WithAllowAndEveryGatewayResponseARequestID() async throws {
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            routes:
              - {name: orders, match: {methods: [POST, PUT], path: /orders}, upstream: echo}
              - {name: status, match: {methods: [GET], prefix: /orders}, upstream: echo}
            """)
        let wrong = try curl(["-s", "-i", "-X", "DELETE", "\(gateway.base)/orders"]).text
        #expect(wrong.hasPrefix("HTTP/1.1 405 Method Not Allowed\r\n"), "\(wrong)")
        #expect(wrong.contains("Allow: POST, PUT, GET\r\n") && wrong.contains("urn:gatewayd:problem:method-not-allowed"))
        let unknown = try curl(["-s", "-i", "\(gateway.base)/nowhere"]).text
        #expect(unknown.hasPrefix("HTTP/1.1 404 Not Found\r\n") && !unknown.contains("Allow:"))
        for response in [wrong, unknown, try rawExchange(port: gateway.port, Array("GET http://elsewhere/ HTTP/1.1\r\nHost: a\r\n\r\n".utf8))] {
            let id = response.split(separator: "\r\n").first { $0.hasPrefix("X-Request-Id: ") }?.dropFirst(14)
            #expect(id?.count == 32, "\(response)")
        }
        // A client's own id is kept.
        #expect(try curl(["-s", "-i", "-H", "X-Request-Id: mine-1", "\(gateway.base)/nowhere"]).text.contains("X-Request-Id: mine-1\r\n"))
    }
}
