import CNGHTTP2
import Testing
@testable import Gateway

/// Routing and the upstream read the same path; HTTP/2 requests become the
/// HTTP/1.1 requests RFC 9113 §8.2.3 and §8.3.1 say they are.
@Suite(.ownThreads) struct PathNormalizationTests {
    @Test(arguments: [
        ("/", "/"), ("/a/b", "/a/b"), ("/api/../search", "/search"), ("/a/./b", "/a/b"), ("/a/b/..", "/a/"),
        ("/a/b/.", "/a/b/"), ("/../../etc", "/etc"), ("/a//b///c", "/a/b/c"), ("//", "/"), ("/a/", "/a/"),
        ("/api/%2e%2E/admin", "/admin"), ("/a/%2E/b", "/a/b"), ("/a/.../b", "/a/.../b"), ("/a/.b/c", "/a/.b/c"),
        // Percent-encoded unreserved characters are decoded (RFC 3986 §6.2.2.2); other triplets are kept.
        ("/a/%41", "/a/A"), ("/a/b%2e", "/a/b."), ("/%6cogin", "/login"), ("/%6C%6F%67%69%6E", "/login"), ("/%7euser/%2d_", "/~user/-_"),
        ("/a%20b", "/a%20b"), ("/a%3Bb", "/a%3Bb"), ("/a%", "/a%"), ("/a%6", "/a%6"), ("/a%zz", "/a%zz"), ("/%C3%A9", "/%C3%A9"),
        // Escaped slashes stay inside their segment, unchanged.
        ("/a%2Fb", "/a%2Fb"), ("/a/%2f/../b", "/a/b"), ("/x/%5c", "/x/%5c"), ("/p%2F..%2Fadmin", "/p%2F..%2Fadmin"),
    ])
    func normalizes(path: String, expected: String) {
        #expect(PathNormalization.normalize(path[...]) == expected[...])
    }

    @Test func theUpstreamGetsThePathTheRouteMatched() async throws {
        let upstream = RecordingUpstream()
        let port = try await upstream.start()
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            upstreams: {app: {url: "http://127.0.0.1:\(port)"}}
            routes:
              - {name: api, match: {prefix: /api/}, upstream: app, headers: {set: {X-Route: api}}}
              - {name: rest, upstream: app, headers: {set: {X-Route: rest}}}
            """)
        for target in ["/api/../search", "/api//v1/./items/", "/api/%2e%2e/admin?x=1"] {
            #expect(try curl(["-s", "-o", "/dev/null", "-w", "%{http_code}", "--path-as-is", gateway.base + target]).text == "200")
        }
        #expect(try curl(["-s", "-o", "/dev/null", "-w", "%{http_code}", "--path-as-is", gateway.base + "/api/a%2Fb/./c"]).text == "200")
        // The same over h2c.
        let client = try NGHTTP2Client(port: gateway.port)
        let stream = client.submit(method: "GET", path: "/api/./../h2")
        client.run { $0.responses[stream]?.closed == true }
        #expect(client.responses[stream]?.status == "200")

        let seen = upstream.requests.map { "\($0.uri) \($0.header("X-Route").joined())" }
        #expect(seen == ["/search rest", "/api/v1/items/ api", "/admin?x=1 rest", "/api/a%2Fb/c api", "/h2 rest"])
    }

    @Test func h2CookiesAreJoinedAndUserinfoInTheAuthorityIsRefused() async throws {
        let upstream = RecordingUpstream()
        let port = try await upstream.start()
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            upstreams: {app: {url: "http://127.0.0.1:\(port)"}}
            routes: [{name: app, upstream: app}]
            """)
        let client = try NGHTTP2Client(port: gateway.port)
        let cookies = client.submit(method: "GET", path: "/c", headers: [("cookie", "a=1"), ("x-other", "o"), ("cookie", "b=2")])
        let userinfo = client.submit(method: "GET", path: "/u", authority: "user:pw@upstream.test")
        client.run { $0.responses[cookies]?.closed == true && $0.responses[userinfo]?.closed == true }
        #expect(client.responses[cookies]?.status == "200")
        #expect(client.responses[userinfo]?.resetCode == NGHTTP2_PROTOCOL_ERROR.rawValue)
        #expect(upstream.requests.map(\.uri) == ["/c"])
        #expect(upstream.requests.first?.header("Cookie") == ["a=1; b=2"])
    }
}
