import Rewriter
import Testing
@testable import Gateway

@Suite(.ownThreads) struct RouterTests {
    static let router: Router = {
        let yaml = """
            listeners: [{address: 127.0.0.1:0}]
            routes:
              - {name: by-host, upstream: echo, match: {host: "*.example.com", path: /h}}
              - {name: by-header, upstream: echo, match: {path: /h, headers: {X-Version: "2"}}}
              - {name: exact, upstream: echo, match: {methods: [GET], path: /search}}
              - {name: pattern, upstream: echo, match: {path: "/users/{id}/posts/{post}"}}
              - {name: prefix, upstream: echo, match: {prefix: /api/}}
              - {name: fallback, upstream: echo}
            """
        return Router(config: try! ConfigLoader.load(yaml: yaml).config)
    }()

    func route(_ method: String, _ path: String, host: String? = "localhost", headers: HeaderList = [:]) -> String? {
        Self.router.match(method: method, path: path, host: host, headers: headers)?.route.config.name
    }

    @Test func firstMatchWins() {
        #expect(route("GET", "/search") == "exact")
        #expect(route("POST", "/search") == "fallback")
        #expect(route("GET", "/search/") == "fallback")
        #expect(route("GET", "/api/x/y") == "prefix")
        #expect(route("GET", "/api") == "fallback")
        #expect(route("GET", "/h", host: "a.example.com:8080") == "by-host")
        #expect(route("GET", "/h", host: "A.EXAMPLE.COM") == "by-host")
        #expect(route("GET", "/h", host: "example.com") == "fallback")
        #expect(route("GET", "/h", headers: ["x-version": "2"]) == "by-header")
        #expect(route("GET", "/h", headers: ["X-Version": "3"]) == "fallback")
    }

    @Test func capturesArePercentDecodedOnce() throws {
        let match = try #require(Self.router.match(method: "GET", path: "/users/a%2Fb%2541/posts/%C3%A9", host: nil, headers: [:]))
        #expect(match.route.config.name == "pattern")
        #expect(match.captures.map(\.name) == ["id", "post"])
        #expect(match.captures.map(\.value) == ["a/b%41", "é"])
        #expect(route("GET", "/users//posts/1") == "fallback")
        #expect(route("GET", "/users/1/posts/2/3") == "fallback")
    }
}
