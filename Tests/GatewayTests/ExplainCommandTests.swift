import Foundation
import Testing

/// `gatewayd explain` and `check` run as a subprocess of the built binary.
@Suite struct ExplainCommandTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static var binary: String {
        ProcessInfo.processInfo.environment["GATEWAYD_BIN"] ?? root.appendingPathComponent(".build/debug/gatewayd").path
    }

    func run(_ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = arguments
        process.currentDirectoryURL = Self.root
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        let errData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: outData, as: UTF8.self), String(decoding: errData, as: UTF8.self))
    }

    @Test func searchFromJSONBody() throws {
        let result = try run(["explain", "-H", "Content-Type: application/json", "-H", "Cookie: session=1",
                              "-d", #"{"keywords":"swift nio","sort":"stars","since":"2024-05-01T00:00:00Z"}"#, "POST", "/search"])
        #expect(result.status == 0)
        #expect(result.out == """
            # route search (routes[0]) -> upstream echo (built-in echo)
            GET /v1/search?q=swift%20nio&sort=stars&order=desc&since=1714521600000&version=2 HTTP/1.1\r
            Host: echo\r
            X-Api-Key: demo-key\r
            \r

            """)
    }

    @Test func formPost() throws {
        let result = try run(["explain", "-H", "Content-Type: application/json", "-d",
                              #"{"item":"A-1","qty":"2","gift":true,"tags":["red","xl"]}"#, "POST", "/orders"])
        #expect(result.status == 0)
        #expect(result.out.hasSuffix("""
            POST /legacy/order.php HTTP/1.1\r
            Host: echo\r
            Content-Type: application/x-www-form-urlencoded\r
            Content-Length: 50\r
            \r
            item=A-1&qty=2&gift=1&tags%5B%5D=red&tags%5B%5D=xl

            """))
    }

    @Test func aJSONObjectWithoutContentTypeIsSentAsAFormWithAHint() throws {
        let json = try run(["explain", "-d", #"{"item":"A-1"}"#, "POST", "/orders"])
        #expect(json.err.contains("hint: the body is a JSON object but is sent as a form"))
        #expect(json.err.contains("-H 'Content-Type: application/json'"))
        let form = try run(["explain", "-d", "item=A-1", "POST", "/orders"])
        #expect(form.status == 0 && form.err.isEmpty)
    }

    @Test func multipartUploadShowsItsRealBoundary() throws {
        let result = try run(["explain", "-H", "Content-Type: application/json", "-d",
                              #"{"title":"notes","file":"data:text/plain;name=notes.txt;base64,aGVsbG8="}"#, "POST", "/upload"])
        #expect(result.status == 0)
        let boundary = try #require(result.out.split(separator: "boundary=").last?.prefix(33))
        #expect(result.out.contains("""
            --\(boundary)\r
            Content-Disposition: form-data; name="file"; filename="notes.txt"\r
            Content-Type: text/plain\r
            \r
            hello\r
            --\(boundary)--\r
            """))
    }

    @Test func templatePathAndPassThrough() throws {
        let posts = try run(["explain", "GET", "/users/42/posts?tag=a&tag=b&draft=true"])
        #expect(posts.out.contains("GET /api/v1/users/42/posts?tag=a&tag=b&draft=true HTTP/1.1\r\n"))
        let api = try run(["explain", "-H", "Cookie: a=b", "GET", "/api/anything?x=%2F"])
        #expect(api.out.hasSuffix("GET /api/anything?x=%2F HTTP/1.1\r\nHost: echo\r\nX-Gateway: gatewayd\r\nVia: 1.1 gatewayd\r\n\r\n"))
    }

    @Test func problemsAreShownAndExitNonZero() throws {
        let missing = try run(["explain", "GET", "/search"])
        #expect(missing.status == 1)
        #expect(missing.out.contains("HTTP/1.1 400 Bad Request\r\nContent-Type: application/problem+json\r\n"))
        #expect(missing.out.contains(#""detail":"required parameter 'keywords' (sent upstream as 'q') is missing","route":"search"}"#))
        let none = try run(["explain", "GET", "/nothing"])
        #expect(none.status == 1)
        #expect(none.out.contains("HTTP/1.1 404 Not Found"))
    }

    @Test func checkSummariesAndErrors() throws {
        let ok = try run(["check", "-c", "config/gatewayd.yaml"])
        #expect(ok.status == 0)
        #expect(ok.out == "config/gatewayd.yaml: OK (1 listener, 5 routes, 0 upstreams + echo)\n")
        let broken = FileManager.default.temporaryDirectory.appendingPathComponent("broken-\(getpid()).yaml")
        try "listeners: [{address: nowhere}]\nroutes:\n  - {name: r, upstream: nope, timeout: 5}\n".write(to: broken, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: broken) }
        let bad = try run(["check", "-c", broken.path])
        #expect(bad.status == 1)
        #expect(bad.err.contains("\(broken.path):1:23: listeners[0].address: expected host:port or [v6]:port, found 'nowhere'"))
        #expect(bad.err.contains("\(broken.path):3:25: routes[0].upstream: unknown upstream 'nope' (declared: echo)"))
        #expect(bad.err.contains("\(broken.path):3:40: routes[0].timeout: expected a duration"))
        #expect(bad.err.contains("3 problems found"))
        let version = try run(["--version"])
        #expect(version.out == "0.1.0\n")
    }
}
