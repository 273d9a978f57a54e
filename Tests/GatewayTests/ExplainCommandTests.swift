import Foundation
import Testing

/// `gatewayd explain` and `check` run as a subprocess of the built binary.
@Suite(.ownThreads) struct ExplainCommandTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static var binary: String {
        ProcessInfo.processInfo.environment["GATEWAYD_BIN"] ?? root.appendingPathComponent(".build/debug/gatewayd").path
    }

    func run(_ arguments: [String], in directory: URL = root) throws -> (status: Int32, out: String, err: String) {
        let result = try runPeer(Self.binary, arguments, directory: directory.path)
        return (result.status, result.text, result.err)
    }

    @Test func searchFromJSONBody() throws {
        let result = try run(["explain", "-H", "Content-Type: application/json", "-H", "Cookie: session=1", "-H", "X-Request-Id: req-1",
                              "-d", #"{"keywords":"swift nio","sort":"stars","since":"2024-05-01T00:00:00Z"}"#, "POST", "/search"])
        #expect(result.status == 0)
        #expect(result.out == """
            # route search (routes[0]) -> upstream echo (built-in echo)
            GET /v1/search?q=swift%20nio&sort=stars&order=desc&since=1714521600000&version=2 HTTP/1.1\r
            X-Request-Id: req-1\r
            Host: echo\r
            X-Forwarded-For: 127.0.0.1\r
            X-Forwarded-Proto: http\r
            X-Forwarded-Host: 127.0.0.1:8080\r
            X-Api-Key: demo-key\r
            \r

            """)
    }

    @Test func formPost() throws {
        let result = try run(["explain", "-H", "Content-Type: application/json", "-H", "X-Request-Id: req-2", "-d",
                              #"{"item":"A-1","qty":"2","gift":true,"tags":["red","xl"]}"#, "POST", "/orders"])
        #expect(result.status == 0)
        #expect(result.out.hasSuffix("""
            POST /legacy/order.php HTTP/1.1\r
            X-Request-Id: req-2\r
            Host: echo\r
            X-Forwarded-For: 127.0.0.1\r
            X-Forwarded-Proto: http\r
            X-Forwarded-Host: 127.0.0.1:8080\r
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
        let api = try run(["explain", "-H", "Cookie: a=b", "--client", "203.0.113.9", "GET", "/api/anything?x=%2F"])
        // The request id is generated, and said so.
        let words = api.out.split(separator: "\n").dropFirst().first?.split(separator: " ") ?? []
        let id = try #require(words.count > 2 ? words[2] : nil)
        #expect(api.out.contains("# X-Request-Id \(id) is generated here; each call gets its own\n"))
        #expect(api.out.hasSuffix("""
            GET /api/anything?x=%2F HTTP/1.1\r\nHost: echo\r\nX-Forwarded-For: 203.0.113.9\r\nX-Forwarded-Proto: http\r
            X-Forwarded-Host: 127.0.0.1:8080\r\nX-Request-Id: \(id)\r\nX-Gateway: gatewayd\r\nVia: 1.1 gatewayd\r\n\r\n
            """))
    }

    @Test func problemsAreShownAndExitNonZero() throws {
        let missing = try run(["explain", "GET", "/search"])
        #expect(missing.status == 1)
        #expect(missing.out.contains("HTTP/1.1 400 Bad Request\r\nContent-Type: application/problem+json\r\n"))
        #expect(missing.out.contains(#""detail":"required parameter 'keywords' (sent upstream as 'q') is missing","route":"search"}"#))
        // What the daemon refuses before routing, explain refuses the same way.
        let foreign = try run(["explain", "GET", "http://elsewhere.example/search?keywords=a"])
        #expect(foreign.status == 1 && foreign.out.contains("HTTP/1.1 400 Bad Request") && foreign.out.contains("bad-target"))
        let own = try run(["explain", "GET", "http://127.0.0.1:8080/x/../search?keywords=a"])
        #expect(own.status == 0 && own.out.contains("GET /v1/search?q=a&order=desc&version=2 HTTP/1.1\r\n"))
        // A 405 shows the Allow the daemon sends with it.
        let wrongMethod = try run(["explain", "DELETE", "/orders"])
        #expect(wrongMethod.status == 1 && wrongMethod.out.contains("HTTP/1.1 405 Method Not Allowed\r\n") && wrongMethod.out.contains("\r\nAllow: POST\r\n"))
        // What no reader would take is said with explain's usage.
        for (arguments, message) in [(["GE T", "/x"], "'GE T' is not a method"), (["GET", "search?q=1"], "'search?q=1' is not a request target"),
                                     (["-d", "@missing.json", "POST", "/orders"], "cannot read missing.json: No such file or directory")] {
            let refused = try run(["explain"] + arguments)
            #expect(refused.status == 64 && refused.err.contains(message) && refused.err.contains("Usage: gatewayd explain"), "\(refused.err)")
        }
        // The upgrade checks are the daemon's: refused where the route does not
        // switch, and where it does, the one protocol asked of the upstream.
        let upgrade = ["-H", "Connection: Upgrade, HTTP2-Settings", "-H", "Upgrade: websocket, h2c", "-H", "HTTP2-Settings: AAMAAABkAAQAAP__"]
        let notAllowed = try run(["explain", "-c", "config/examples/websocket.yaml"] + upgrade + ["GET", "/api/x"])
        #expect(notAllowed.status == 1 && notAllowed.out.contains("HTTP/1.1 400 Bad Request") && notAllowed.out.contains("upgrade-not-allowed"))
        let allowed = try run(["explain", "-c", "config/examples/websocket.yaml"] + upgrade + ["GET", "/live"])
        #expect(allowed.status == 0 && allowed.out.contains("\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"), "\(allowed.out)")
        #expect(!allowed.out.lowercased().contains("h2c") && !allowed.out.lowercased().contains("http2-settings"))
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
        #expect(try run(["-v"]).out == "0.1.0\n")
        // The file as check's argument, as -c gives it.
        let positional = try run(["check", "config/gatewayd.yaml"])
        #expect(positional.status == 0 && positional.out == ok.out)
        #expect(try run(["check", broken.path]).err.contains("3 problems found"))
        #expect(try run(["--help"]).out.contains("/store"))
        // What the OpenAPI document cannot say of a route is noted, without failing the check.
        let headerMatched = try run(["check", "config/examples/header-injection.yaml"])
        #expect(headerMatched.status == 0 && headerMatched.out.hasSuffix(": OK (1 listener, 2 routes, 2 upstreams + echo)\n"))
        #expect(headerMatched.err.contains("note: openapi: routes[1] (reports) is matched by header X-Api-Version: 2, which OpenAPI cannot express"),
                "\(headerMatched.err)")
    }

    /// explain shows secrets as /config does, <redacted>, unless asked.
    @Test func explainRedactsSecretsUnlessAsked() throws {
        let arguments = ["explain", "-c", "config/examples/header-injection.yaml", "-H", "X-Api-Version: 2", "GET", "/reports/q1"]
        let redacted = try run(arguments)
        #expect(redacted.status == 0)
        #expect(redacted.out.contains("X-Api-Key: <redacted>\r\n") && !redacted.out.contains("demo-reports-key"), "\(redacted.out)")
        let shown = try run(["explain", "--show-secrets"] + arguments.dropFirst())
        #expect(shown.out.contains("X-Api-Key: demo-reports-key\r\n"), "\(shown.out)")
    }

    @Test func commandLineMistakesSayWhatIsWrong() throws {
        let typo = try run(["chek"])
        #expect(typo.status == 64)
        #expect(typo.err == "gatewayd: unknown command 'chek'; the commands are run, check, explain, routes, openapi (see gatewayd --help)\n")
        let loops = try run(["run", "--event-loops", "0"])
        #expect(loops.status != 0 && loops.err.contains("--event-loops must be at least 1, found 0"))
        let missing = try run(["check", "-c", "/nonexistent/gatewayd.yaml"])
        #expect(missing.err.hasPrefix("/nonexistent/gatewayd.yaml: cannot read the file: no such file (working directory \(Self.root.path)"))
        let elsewhere = try run(["check"], in: FileManager.default.temporaryDirectory)
        #expect(elsewhere.status == 1)
        if !FileManager.default.fileExists(atPath: "/etc/gatewayd/gatewayd.yaml") {
            #expect(elsewhere.err.hasPrefix("no config file: neither config/gatewayd.yaml (in /"), "\(elsewhere.err)")
            #expect(elsewhere.err.hasSuffix(") nor /etc/gatewayd/gatewayd.yaml exists; give one with -c FILE\n"), "\(elsewhere.err)")
        }

        // A port another process holds.
        let holder = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(holder) }
        var address = sockaddr_in(sin_family: sa_family_t(AF_INET), sin_port: 0, sin_addr: in_addr(s_addr: inet_addr("127.0.0.1")), sin_zero: (0, 0, 0, 0, 0, 0, 0, 0))
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(holder, $0, length) } }
        _ = listen(holder, 1)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(holder, $0, &length) } }
        let port = Int(UInt16(bigEndian: address.sin_port))
        let config = FileManager.default.temporaryDirectory.appendingPathComponent("busy-\(getpid()).yaml")
        try "listeners: [{address: 127.0.0.1:\(port)}]\n".write(to: config, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: config) }
        let busy = try run(["run", "-c", config.path])
        #expect(busy.status != 0)
        #expect(busy.err.contains("127.0.0.1:\(port) is already in use (another process listens there)"), "\(busy.err)")
        #expect(!busy.err.contains("errno"))
    }

    /// What explain prints is byte for byte what the daemon sends a real upstream for the same request.
    @Test func explainPrintsWhatTheDaemonSends() async throws {
        let upstream = RawUpstream { _ in .init("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") }
        let upstreamPort = try await upstream.start()
        let config = FileManager.default.temporaryDirectory.appendingPathComponent("explain-\(getpid()).yaml")
        try """
            listeners: [{address: 127.0.0.1:0}]
            upstreams: {legacy: {url: "http://127.0.0.1:\(upstreamPort)/base", headers: {set: {X-Api-Key: k1}}}}
            routes:
              - name: search
                match: {path: /search, methods: [POST]}
                upstream: legacy
                rewrite:
                  method: GET
                  path: "/v1/find{?q,limit}"
                  params:
                    q: {from: keywords, required: true}
                    limit: {type: int, default: 10}
            """.write(to: config, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: config) }
        let gateway = try SpawnedGateway(config: config.path)
        defer { gateway.stop() }
        let body = #"{"keywords":"swift nio","limit":"5"}"#
        let fields = ["Host: api.local", "Content-Type: application/json", "X-Request-Id: same-1", "X-Forwarded-For: 10.1.1.1"]
        let response = try rawExchange(port: gateway.port, Array((["POST /x/../search HTTP/1.1"] + fields
            + ["Content-Length: \(body.utf8.count)", "Connection: close", "", body]).joined(separator: "\r\n").utf8))
        #expect(response.hasPrefix("HTTP/1.1 200 OK\r\n"))
        let explained = try run(["explain", "-c", config.path] + fields.flatMap { ["-H", $0] } + ["-d", body, "POST", "/x/../search"])
        #expect(explained.status == 0)
        let sent = try #require(upstream.requests.first?.text)
        #expect(explained.out.hasSuffix("\n" + sent), "explain:\n\(explained.out)\nsent:\n\(sent)")
        // The client is no trusted proxy: its X-Forwarded-For is replaced, in explain as in the daemon.
        #expect(sent.contains("X-Forwarded-For: 127.0.0.1\r\n") && sent.contains("X-Request-Id: same-1\r\n"))
    }

    @Test func routesPrintsTheTableInMatchingOrder() throws {
        let result = try run(["routes", "-c", "config/examples/retries.yaml"])
        #expect(result.status == 0)
        #expect(result.out.hasPrefix("""
            routes[0] flaky
              match     any method  /flaky/…
              upstream  flaky http://127.0.0.1:9300
              timeout   5s
              retry     3 attempts; on connect-failure, reset, timeout, refused-stream; methods GET,HEAD,OPTIONS,PUT,DELETE; \
            per try 1s; backoff exponential 25ms..1s with jitter; budget 20% per 10s
              validate  routes[0].validate[0] (status 502-504): then retry, else next

            """), "\(result.out)")
        #expect(result.out.contains("then refresh via auth POST /token, then retry"))
        // Every endpoint of an upstream, and what a header validator checks.
        let balanced = try run(["routes", "-c", "config/examples/load-balancing.yaml"]).out
        #expect(balanced.contains("http://10.0.0.11:8080, http://10.0.0.12:8080 (least_request)"), "\(balanced)")
        let config = FileManager.default.temporaryDirectory.appendingPathComponent("routes-\(getpid()).yaml")
        try "listeners: [{address: 127.0.0.1:0}]\nroutes: [{name: r, upstream: echo, validate: [{header: {name: X-Err, present: true}, then: fail}]}]\n"
            .write(to: config, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: config) }
        #expect(try run(["routes", "-c", config.path]).out.contains("routes[0].validate[0] (header X-Err present): then fail, else next"))
    }

    /// A prefix mapped to another keeping the rest, and a template value that
    /// would make a dot segment: the daemon (over HTTP/1.1 and h2c) and
    /// explain agree, byte for byte.
    @Test func prefixRewritingAndTemplateRefusalsAreTheDaemonsAndExplains() async throws {
        let upstream = RawUpstream { _ in .init("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") }
        let upstreamPort = try await upstream.start()
        let config = FileManager.default.temporaryDirectory.appendingPathComponent("explain-prefix-\(getpid()).yaml")
        try """
            listeners: [{address: 127.0.0.1:0}]
            upstreams: {legacy: {url: "http://127.0.0.1:\(upstreamPort)/base"}}
            routes:
              - {name: v2, match: {prefix: /api/}, upstream: legacy, rewrite: {prefix: /v2/}}
              - name: posts
                match: {prefix: /posts}
                upstream: legacy
                rewrite: {path: "/users/{uid}/posts/{pid}", params: {uid: {required: true}, pid: {required: true}}}
            """.write(to: config, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: config) }
        let gateway = try SpawnedGateway(config: config.path)
        defer { gateway.stop() }
        #expect(try await curlDetached(["http://127.0.0.1:\(gateway.port)/api/a/b?x=1"]).text == "ok")
        let explained = try run(["explain", "-c", config.path, "GET", "/api/a/b?x=1"])
        let sent = try #require(upstream.requests.first?.text)
        #expect(sent.hasPrefix("GET /base/v2/a/b?x=1 HTTP/1.1\r\n"))
        #expect(explained.status == 0 && explained.out.contains("\nGET /base/v2/a/b?x=1 HTTP/1.1\r\n"), "\(explained.out)")
        #expect(try await curlDetached(["--http2-prior-knowledge", "http://127.0.0.1:\(gateway.port)/api/c"]).text == "ok")
        #expect(upstream.requests.last?.text.hasPrefix("GET /base/v2/c HTTP/1.1\r\n") == true)
        // Dot segments from a template's values: a 400 naming the parameter, the upstream untouched.
        let count = upstream.requests.count
        for peer in [[], ["--http2-prior-knowledge"]] {
            let refused = try await curlDetached(peer + ["-i", "http://127.0.0.1:\(gateway.port)/posts?uid=..&pid=.."]).text
            #expect((refused.hasPrefix("HTTP/1.1 400 ") || refused.hasPrefix("HTTP/2 400 ")) && refused.contains("urn:gatewayd:problem:invalid-parameter")
                && refused.contains("parameter 'uid' would make a '.' or '..' segment of the upstream path"), "\(refused)")
        }
        #expect(upstream.requests.count == count)
        let shown = try run(["explain", "-c", config.path, "GET", "/posts?uid=..&pid=.."])
        #expect(shown.status == 1 && shown.out.contains("HTTP/1.1 400 Bad Request")
            && shown.out.contains("parameter 'uid' would make a '.' or '..' segment of the upstream path"), "\(shown.out)")
    }
}
