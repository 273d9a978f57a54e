import Foundation
import Testing

/// `explain --answer FILE` prints what the client gets for an upstream's
/// answer, byte for byte as the daemon writes it: the same answer served by
/// a raw upstream to the daemon, over HTTP/1.1, comes back as explain's
/// bytes (the Date and the request id aside, which each call makes anew).
@Suite(.ownThreads) struct ExplainAnswerEqualsDaemonTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var target: String
        var answer: String
        var testDescription: String { target }
    }

    static func http(_ status: String, _ type: String, _ body: String, extra: String = "") -> String {
        "HTTP/1.1 \(status)\r\nServer: legacy\r\nContent-Type: \(type)\r\nContent-Length: \(body.utf8.count)\r\n\(extra)\r\n\(body)"
    }

    static let cases: [Case] = [
        Case(target: "/users/7", answer: http("200 OK", "text/xml; charset=utf-8", AnswerWireTests.user)),
        Case(target: "/users/8", answer: http("500 Internal Server Error", "text/xml; charset=utf-8", AnswerWireTests.fault)),
        Case(target: "/users/9", answer: http("200 OK", "text/xml", "<r><id>1</r></id>")),
        Case(target: "/users/10", answer: http("204 No Content", "text/xml", "")),
        Case(target: "/plain/a", answer: http("200 OK", "text/plain", "as it came", extra: "Cache-Control: no-store\r\n")),
        Case(target: "/plain/b", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
    ]

    /// The SOAP example, and a pass-through route with response rules.
    static func config(upstream: Int) throws -> String {
        try String(contentsOf: ExplainCommandTests.root.appendingPathComponent("config/examples/soap-users.yaml"), encoding: .utf8)
            .replacingOccurrences(of: "127.0.0.1:8080", with: "127.0.0.1:0").replacingOccurrences(of: "127.0.0.1:8000", with: "127.0.0.1:\(upstream)")
            + "  - {name: plain, match: {prefix: /plain/}, upstream: users, response_headers: {set: {X-Served-By: gatewayd}, remove: [Server]}}\n"
    }

    /// Date and request id values masked.
    static func masked(_ text: String) -> String {
        text.replacing(/Date: [^\r\n]*/, with: "Date: -").replacing(/X-Request-Id: [0-9a-f]*/, with: "X-Request-Id: -")
    }

    @Test(arguments: cases) func explainPrintsWhatTheDaemonWrites(_ sample: Case) async throws {
        let upstream = RawUpstream { _ in .init(sample.answer) }
        let port = try await upstream.start()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("explain-answer-\(getpid())-\(UInt32.random(in: 0 ... .max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let yaml = try Self.config(upstream: port)
        try yaml.write(to: directory.appendingPathComponent("gateway.yaml"), atomically: true, encoding: .utf8)
        try sample.answer.write(to: directory.appendingPathComponent("answer.http"), atomically: true, encoding: .utf8)
        let explained = try ExplainCommandTests().run(["explain", "-c", directory.appendingPathComponent("gateway.yaml").path,
                                                       "--answer", directory.appendingPathComponent("answer.http").path, "GET", sample.target])
        #expect(explained.status == 0, "\(explained.err)")
        let printed = try #require(explained.out.components(separatedBy: "answer.http:\n").last)

        let gateway = try await GatewayHarness.start(yaml)
        let written = try rawExchange(port: gateway.port, Array("GET \(sample.target) HTTP/1.1\r\nHost: x\r\n\r\n".utf8), halfClose: true)
        // explain ends what it prints with a line feed.
        #expect(Self.masked(printed) == Self.masked(written.utf8.last == 0x0A ? written : written + "\n"))
        #expect(written.hasPrefix("HTTP/1.1 "))
    }
}
