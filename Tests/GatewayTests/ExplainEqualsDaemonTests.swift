import Foundation
import Testing

/// `explain` and the daemon share one admission step: the explain tests'
/// requests and a sample request for every example config go through a
/// spawned daemon to a recording upstream, over HTTP/1.1 and h2c, and the
/// bytes that reached it are explain's, byte for byte — generated ids (the
/// request id, a started trace, a multipart boundary) aside. A request the
/// gateway answers itself gets explain's status, fields and problem.
@Suite(.ownThreads) struct ExplainEqualsDaemonTests {
    struct Sample: CustomTestStringConvertible, Sendable {
        var method: String
        var target: String
        var headers: [String] = []
        var body: String?
        /// Also sent over h2c (an HTTP/1.1 upgrade or absolute-form target cannot be).
        var h2c = true
        var testDescription: String { "\(method) \(target)" }
    }

    static let search = #"{"keywords":"swift nio","sort":"stars","since":"2024-05-01T00:00:00Z"}"#
    static let json = "Content-Type: application/json"
    static let upgrade = ["Connection: Upgrade, HTTP2-Settings", "Upgrade: websocket, h2c", "HTTP2-Settings: AAMAAABkAAQAAP__"]

    static let samples: [(config: String, samples: [Sample])] = [
        ("config/gatewayd.yaml", [
            Sample(method: "POST", target: "/search", headers: [json, "Cookie: session=1", "X-Request-Id: req-1"], body: search),
            Sample(method: "POST", target: "/orders", headers: [json, "X-Request-Id: req-2"],
                   body: #"{"item":"A-1","qty":"2","gift":true,"tags":["red","xl"]}"#),
            Sample(method: "POST", target: "/orders", headers: ["Content-Type: application/x-www-form-urlencoded"], body: "item=A-1"),
            Sample(method: "POST", target: "/upload", headers: [json], body: #"{"title":"notes","file":"data:text/plain;name=notes.txt;base64,aGVsbG8="}"#),
            Sample(method: "GET", target: "/users/42/posts?tag=a&tag=b&draft=true"),
            Sample(method: "GET", target: "/api/anything?x=%2F", headers: ["Cookie: a=b"]),
            Sample(method: "GET", target: "/search"),
            Sample(method: "GET", target: "/x/../search?keywords=a"),
            Sample(method: "GET", target: "http://elsewhere.example/search?keywords=a", h2c: false),
            Sample(method: "GET", target: "http://{listener}/x/../search?keywords=a", h2c: false),
            Sample(method: "DELETE", target: "/orders"),
            Sample(method: "GET", target: "/nothing"),
        ]),
        ("config/examples/websocket.yaml", [
            Sample(method: "GET", target: "/api/x", headers: upgrade, h2c: false),
            Sample(method: "GET", target: "/live", headers: upgrade, h2c: false),
            Sample(method: "GET", target: "/api/x?y=1", headers: ["X-Request-Id: ws-1"]),
        ]),
        ("config/examples/circuit-breaking.yaml", [Sample(method: "GET", target: "/reports/1?full=true")]),
        ("config/examples/header-injection.yaml", [
            Sample(method: "GET", target: "/billing/invoices?month=5", headers: ["Cookie: s=1", "X-Debug: 1", "X-Request-Id: hi-1"]),
            Sample(method: "GET", target: "/reports/q1", headers: ["X-Api-Version: 2"]),
        ]),
        ("config/examples/fleet.yaml", [Sample(method: "GET", target: "/orders/5", headers: ["X-Tenant: t1"])]),
        ("config/examples/filters.yaml", [Sample(method: "GET", target: "/orders/7"), Sample(method: "DELETE", target: "/orders/8?force=1")]),
        ("config/examples/health-checks.yaml", [Sample(method: "GET", target: "/items/7")]),
        ("config/examples/legacy-form-sidecar.yaml", [
            Sample(method: "POST", target: "/customers", headers: [json], body: #"{"firstName":"Ada","birthday":"1815-12-10T00:00:00Z"}"#),
            Sample(method: "GET", target: "/customers/12"),
            Sample(method: "GET", target: "/customers/x"),
            Sample(method: "POST", target: "/search", headers: [json], body: #"{"q":"a b","tags":["x","y"],"open":true}"#),
            Sample(method: "PUT", target: "/api/v1/things?a=1", headers: ["Content-Type: text/plain"], body: "streamed as it arrives"),
        ]),
        ("config/examples/load-balancing.yaml", [Sample(method: "POST", target: "/orders/9", headers: [json], body: #"{"a":1}"#)]),
        ("config/examples/outlier-detection.yaml", [Sample(method: "GET", target: "/accounts/3")]),
        ("config/examples/rate-limits.yaml", [
            Sample(method: "POST", target: "/login", headers: ["Content-Type: application/x-www-form-urlencoded"], body: "u=a&p=b"),
            Sample(method: "GET", target: "/api/items", headers: ["X-Api-Key: k-1"]),
        ]),
        ("config/examples/soap-users.yaml", [Sample(method: "GET", target: "/users/7"), Sample(method: "GET", target: "/users/seven")]),
        ("config/examples/retries.yaml", [Sample(method: "GET", target: "/flaky/a"), Sample(method: "GET", target: "/protected/b")]),
        ("config/examples/tracing.yaml", [
            Sample(method: "GET", target: "/t", headers: ["traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                                                          "tracestate: a=b"]),
            Sample(method: "GET", target: "/t", headers: ["traceparent: 00-bad"]),
        ]),
    ]

    static var cases: [(config: String, sample: Sample)] { samples.flatMap { entry in entry.samples.map { (entry.config, $0) } } }

    @Test(arguments: samples.map(\.config))
    func explainIsWhatTheDaemonSends(config: String) async throws {
        let samples = try #require(Self.samples.first { $0.config == config }?.samples)
        // One recording upstream per endpoint (an upstream's endpoints must differ).
        let upstreams = (0..<3).map { _ in
            RawUpstream { _ in .init("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 15\r\n\r\n{\"status\":\"ok\"}") }
        }
        var upstreamPorts: [Int] = []
        for upstream in upstreams { upstreamPorts.append(try await upstream.start()) }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("explain-equals-\(getpid())-\(UInt32.random(in: 0 ... .max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let original = ExplainCommandTests.root.appendingPathComponent(config)
        for beside in ["billing.credentials", "filters"] {
            try? FileManager.default.copyItem(at: original.deletingLastPathComponent().appendingPathComponent(beside),
                                              to: directory.appendingPathComponent(beside))
        }
        let daemonConfig = directory.appendingPathComponent("daemon.yaml")
        try Self.pointed(try String(contentsOf: original, encoding: .utf8), upstreamPorts: upstreamPorts, listener: "127.0.0.1:0")
            .write(to: daemonConfig, atomically: true, encoding: .utf8)
        let gateway = try SpawnedGateway(config: daemonConfig.path)
        defer { gateway.stop() }
        // explain's client connects to the first listener: the one the daemon bound.
        let listener = "127.0.0.1:\(gateway.port)"
        let explainConfig = directory.appendingPathComponent("explain.yaml")
        try Self.pointed(try String(contentsOf: original, encoding: .utf8), upstreamPorts: upstreamPorts, listener: listener)
            .write(to: explainConfig, atomically: true, encoding: .utf8)

        for sample in samples {
            let target = sample.target.replacingOccurrences(of: "{listener}", with: listener)
            let headers = ["Host: \(listener)"] + sample.headers
            let explained = try ExplainCommandTests().run(["explain", "--show-secrets", "-c", explainConfig.path] + headers.flatMap { ["-H", $0] }
                + (sample.body.map { ["-d", $0] } ?? []) + [sample.method, target])
            let shown = Self.shownBytes(explained.out)
            for h2c in sample.h2c ? [false, true] : [false] {
                let before = upstreams.map(\.requests.count)
                let answer = h2c ? try await Self.h2c(sample, target: target, headers: headers, port: gateway.port)
                    : try Self.http1(sample, target: target, headers: headers, port: gateway.port)
                let sent = zip(upstreams, before).flatMap { $0.requests.dropFirst($1).map(\.text) }.filter { !$0.hasPrefix("GET /health ") }
                let context = "\(config) \(sample.method) \(target) over \(h2c ? "h2c" : "HTTP/1.1")"
                if explained.status == 0 {
                    // HTTP/2 spells a client's field names in lower case (RFC 9113 §8.2.1): compared without case there.
                    let expected = Self.masked(h2c ? Self.lowerCaseNames(shown) : shown)
                    let received = sent.map { Self.masked(h2c ? Self.lowerCaseNames($0) : $0) }
                    #expect(received == [expected], "\(context)\nexplain:\n\(explained.out)\nsent:\n\(sent)")
                } else {
                    // The gateway's own answer: explain's status, fields and problem, and nothing upstream.
                    #expect(explained.status == 1 && sent.isEmpty, "\(context): \(explained.err) \(sent)")
                    let (status, fields, body) = Self.parts(shown)
                    #expect(answer.status == status, "\(context)\n\(answer)\nexplain:\n\(shown)")
                    #expect(fields.allSatisfy { field in answer.fields.contains { $0.caseInsensitiveCompare(field) == .orderedSame } },
                            "\(context): \(fields) \(answer.fields)")
                    #expect(Self.masked(answer.body) == Self.masked(body), "\(context)")
                }
            }
        }
    }

    /// The config pointed at the recording upstream: every upstream URL, and
    /// the built-in echo's routes, go to it; listener and admin on `listener` and port 0.
    static func pointed(_ yaml: String, upstreamPorts: [Int], listener: String) -> String {
        var text = yaml.replacingOccurrences(of: "address: 127.0.0.1:8080", with: "address: \(listener)")
            .replacingOccurrences(of: "address: 127.0.0.1:9901", with: "address: 127.0.0.1:0")
            .replacingOccurrences(of: "upstreams: {}", with: "upstreams: {recorder: {url: \"http://127.0.0.1:\(upstreamPorts[0])\"}}")
            .replacingOccurrences(of: "upstream: echo", with: "upstream: recorder")
        // Each distinct URL's authority to a recording upstream of its own, in turn.
        var seen: [Substring: Int] = [:]
        while let found = text.range(of: #"http://[0-9.]+:[0-9]{2,4}\b"#, options: .regularExpression) {
            let url = text[found]
            let port = seen[url] ?? upstreamPorts[seen.count % upstreamPorts.count]
            seen[url] = port
            text.replaceSubrange(found, with: "http://127.0.0.1:\(port)")
        }
        return text
    }

    static func lowerCaseNames(_ request: String) -> String {
        let (head, body) = request.range(of: "\r\n\r\n").map { (request[..<$0.lowerBound], request[$0.lowerBound...]) } ?? (request[...], "")
        let lines = head.components(separatedBy: "\r\n")
        let fields = lines.dropFirst().map { line in
            line.firstIndex(of: ":").map { line[..<$0].lowercased() + line[$0...] } ?? line
        }
        return ([lines[0]] + fields).joined(separator: "\r\n") + body
    }

    /// What explain printed after its comment lines: the request (or answer) as bytes on the wire.
    static func shownBytes(_ out: String) -> String {
        var lines = out.split(separator: "\n", omittingEmptySubsequences: false)
        while lines.first?.hasPrefix("# ") == true { lines.removeFirst() }
        return lines.joined(separator: "\n")
    }

    /// Ids the gateway generates per call masked; explain's line end after a body dropped.
    static func masked(_ text: String) -> String {
        var text = text
        for (pattern, mask) in [(#"(?i)(x-request-id: )[0-9a-f]{32}"#, "$1<id>"), (#"(?i)(traceparent: 00-)[0-9a-f]{32}-[0-9a-f]{16}"#, "$1<trace>"),
                                (#"[0-9a-f]{32}"#, "<hex>"), (#"gatewayd-[0-9A-Za-z]{24}"#, "<boundary>")] {
            text = text.replacingOccurrences(of: pattern, with: mask, options: .regularExpression)
        }
        return text.hasSuffix("\n") && !text.hasSuffix("\r\n") ? String(text.dropLast()) : text
    }

    struct Answer: CustomStringConvertible {
        var status: Int
        var fields: [String]
        var body: String
        var description: String { "\(status) \(fields) \(body)" }
    }

    static func parts(_ response: String) -> (status: Int, fields: [String], body: String) {
        let split = response.components(separatedBy: "\r\n\r\n")
        let head = split[0].components(separatedBy: "\r\n")
        let status = Int(head[0].split(separator: " ")[1]) ?? 0
        return (status, head.dropFirst().filter { !$0.lowercased().hasPrefix("content-length:") }, split.dropFirst().joined(separator: "\r\n\r\n"))
    }

    static func http1(_ sample: Sample, target: String, headers: [String], port: Int) throws -> Answer {
        let body = sample.body ?? ""
        let framing = sample.body == nil ? [] : ["Content-Length: \(body.utf8.count)"]
        let response = try rawExchange(port: port, Array((["\(sample.method) \(target) HTTP/1.1"] + headers + framing
            + ["Connection: close", "", body]).joined(separator: "\r\n").utf8))
        let (status, fields, answerBody) = parts(response)
        return Answer(status: status, fields: fields, body: answerBody)
    }

    static func h2c(_ sample: Sample, target: String, headers: [String], port: Int) async throws -> Answer {
        // Only what the sample says: no Accept or User-Agent of curl's own.
        var arguments = ["--http2-prior-knowledge", "-s", "-i", "--max-time", "10", "-H", "Accept:", "-H", "User-Agent:", "-X", sample.method]
        arguments += headers.flatMap { ["-H", $0] }
        if let body = sample.body { arguments += ["--data-binary", body] }
        let response = try await runPeerDetached("/usr/bin/curl", arguments + ["http://127.0.0.1:\(port)\(target)"]).text
        let (status, fields, body) = parts(response)
        return Answer(status: status, fields: fields, body: body)
    }
}
