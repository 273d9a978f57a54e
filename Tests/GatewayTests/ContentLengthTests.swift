import CNGHTTP2
import Testing
@testable import Gateway

/// Content-Length is held to one rule on both protocols, checked against
/// the body that came, and only one canonical decimal goes upstream.
@Suite(.ownThreads) struct ContentLengthTests {
    static func gateway(_ upstreamPort: Int) async throws -> GatewayHarness {
        try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            upstreams: {app: {url: "http://127.0.0.1:\(upstreamPort)"}}
            routes: [{name: app, upstream: app}]
            """)
    }

    /// Sends one POST on a new h2c connection: its header block, then `body`
    /// in one DATA frame that ends the stream. Returns the RST_STREAM code, if any.
    static func h2Post(port: Int, length: String?, body: [UInt8]) throws -> UInt32? {
        let client = try NGHTTP2Client(port: port)
        var fields = [(":method", "POST"), (":path", "/upload"), (":scheme", "http"), (":authority", "a")]
        if let length { fields.append(("content-length", length)) }
        let block = client.encodeHeaderBlock(fields)
        client.sendRaw(NGHTTP2Client.frame(type: 0x1, flags: 0x4, stream: 1, payload: block)
            + NGHTTP2Client.frame(type: 0x0, flags: 0x1, stream: 1, payload: body))
        client.run(seconds: 5) { $0.rawFrames.contains { $0.stream == 1 && ($0.type == 0x3 || $0.type == 0x0 && $0.flags & 1 == 1) } }
        return client.rawFrames.first { $0.type == 0x3 && $0.stream == 1 }?.errorCode
    }

    @Test func h2cContentLengthsHTTP11WouldRefuseResetTheStreamAndReachNoUpstream() async throws {
        let upstream = RecordingUpstream()
        let gateway = try await Self.gateway(try await upstream.start())
        let smuggled = Array("GET /SMUGGLED HTTP/1.1\r\nHost: a\r\nX: 12345\r\n\r\n".utf8)
        #expect(smuggled.count == 45)
        for value in ["+45", "-0", "+0", " 45", "45 ", "45,46", "0x2d", ""] {
            let code = try Self.h2Post(port: gateway.port, length: value, body: smuggled)
            #expect(code == NGHTTP2_PROTOCOL_ERROR.rawValue, "content-length '\(value)'")
        }
        // DATA that does not add up to the length: malformed (RFC 9113 §8.1.1).
        #expect(try Self.h2Post(port: gateway.port, length: "5", body: Array("hel".utf8)) == NGHTTP2_PROTOCOL_ERROR.rawValue)
        #expect(try Self.h2Post(port: gateway.port, length: "5", body: Array("hello world".utf8)) == NGHTTP2_PROTOCOL_ERROR.rawValue)
        #expect(upstream.requests.allSatisfy { $0.bodyCount <= 5 && $0.uri != "/SMUGGLED" })
        #expect(!upstream.requests.contains { $0.body == Array("hello world".utf8) })
    }

    @Test func aLengthEqualInMeaningGoesUpstreamAsOneCanonicalField() async throws {
        let upstream = RecordingUpstream()
        let gateway = try await Self.gateway(try await upstream.start())
        for value in ["05", "5"] {
            #expect(try Self.h2Post(port: gateway.port, length: value, body: Array("hello".utf8)) == nil, "'\(value)'")
        }
        // libnghttp2 reads an HTTP/2 Content-Length as digits only: a list, even of equal values, resets the stream.
        #expect(try Self.h2Post(port: gateway.port, length: "5, 5", body: Array("hello".utf8)) == NGHTTP2_PROTOCOL_ERROR.rawValue)
        for fields in ["Content-Length: 5\r\nContent-Length: 5", "Content-Length: 5, 5", "Content-Length: 005"] {
            let response = try rawExchange(port: gateway.port, Array("POST /upload HTTP/1.1\r\nHost: a\r\n\(fields)\r\nConnection: close\r\n\r\nhello".utf8))
            #expect(response.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(fields)")
        }
        let requests = upstream.requests
        #expect(requests.count == 5)
        for request in requests {
            #expect(request.header("Content-Length") == ["5"], "\(request.headers)")
            #expect(request.body == Array("hello".utf8))
        }
    }
}
