import Foundation
import NIOConcurrencyHelpers
import Rewriter
import Testing
@testable import Gateway

/// The gateway started from Swift code with a config, request modifiers and
/// an access-log destination of the embedder's.
@Suite(.ownThreads) struct EmbeddingTests {
    struct SignRequests: RequestModifier {
        func modify(_ request: inout UpstreamRequest, context: ModifierContext) async throws {
            if request.target.contains("forbidden") {
                throw Problem(status: 403, code: "forbidden", title: "Not for you", detail: "the signer refused", route: context.route)
            }
            request.method = "PATCH"
            request.target += request.target.contains("?") ? "&signed=1" : "?signed=1"
            request.headers.set("X-Signature", "sig-\(context.client.requestID)")
            request.headers.remove("X-Injected")
            if request.body != nil { request.body = Array("replaced".utf8) }
            // A modifier's output that would split the request is refused.
            if request.target.contains("crlf") { request.headers.add("X-Evil", "a\r\nInjected: 1") }
        }
    }

    struct Broken: RequestModifier {
        struct Oops: Error {}
        func modify(_ request: inout UpstreamRequest, context: ModifierContext) async throws {
            if request.target.contains("broken") { throw Oops() }
        }
    }

    @Test func modifiersRunAfterHeaderRulesAndCanFailTheCall() async throws {
        let upstream = RecordingUpstream()
        let port = try await upstream.start()
        let config = try ConfigLoader.load(yaml: """
            listeners: [{address: 127.0.0.1:0}]
            upstreams: {legacy: {url: "http://127.0.0.1:\(port)"}}
            routes:
              - {name: json, upstream: legacy, match: {prefix: /json}, rewrite: {encoding: json}, headers: {set: {X-Injected: "1"}}}
              - {name: api, upstream: legacy, headers: {set: {X-Injected: "1"}}}
            logging: {format: json}
            """).config
        let lines = AccessLines()
        let server = GatewayServer(config: config, modifiers: [Broken(), SignRequests()], accessLines: lines.add, threads: 1)
        Teardown.register { try? await server.shutdown() }
        let gatewayPort = try await server.start()[0].port!
        let base = "http://127.0.0.1:\(gatewayPort)"

        // Modifiers run as tasks on the cooperative pool, which the suite's
        // other tests hold for seconds with blocking peers: the first call
        // may wait that long (never so in the daemon, whose pool is free).
        let ok = try await curlDetached(["-i", "\(base)/items?a=1", "-H", "X-Request-Id: r-1"], maxTime: 60).text
        #expect(ok.hasPrefix("HTTP/1.1 200 OK\r\n"))
        let rewritten = try await curlDetached(["\(base)/json", "-H", "Content-Type: application/json", "-d", #"{"a":1}"#], maxTime: 60)
        #expect(rewritten.text == "ok")
        let forbidden = try await curlDetached(["-i", "\(base)/forbidden"], maxTime: 60).text
        #expect(forbidden.hasPrefix("HTTP/1.1 403 Forbidden\r\n"))
        #expect(forbidden.contains(#""detail":"the signer refused","route":"api"}"#))
        let broken = try await curlDetached(["-i", "\(base)/broken"], maxTime: 60).text
        #expect(broken.hasPrefix("HTTP/1.1 500 Internal Server Error\r\n"))
        #expect(broken.contains(#""type":"urn:gatewayd:problem:modifier-failed""#))
        let crlf = try await curlDetached(["-i", "\(base)/crlf"], maxTime: 60).text
        #expect(crlf.hasPrefix("HTTP/1.1 500 Internal Server Error\r\n"))
        #expect(crlf.contains("a request modifier produced an invalid header X-Evil"))

        let requests = upstream.requests
        #expect(requests.count == 2)
        #expect(requests[0].method == "PATCH")
        #expect(requests[0].uri == "/items?a=1&signed=1")
        #expect(requests[0].header("X-Signature") == ["sig-r-1"])
        #expect(requests[0].header("X-Injected").isEmpty)
        #expect(requests[1].body == Array("replaced".utf8))
        #expect(requests[1].header("Content-Length") == ["8"])

        let access = try await lines.entries(count: 5)
        #expect(access.count == 5)
        let first = try #require(access.first)
        #expect(first["route"] == "api")
        #expect(first["method"] == "GET")
        #expect(first["target"] == "/items?a=1")
        #expect(first["status"] == "200")
        #expect(first["upstream_status"] == "200")
        #expect(first["bytes"] == "2")
        #expect(first["request_id"] == "r-1")
        #expect(access.map { $0["status"] } == ["200", "200", "403", "500", "500"])
    }
}

extension EmbeddingTests {
    struct Teapots: ResponseValidator {
        func validate(_ outcome: TryOutcome, route: String) -> ValidatorSpec.Action {
            guard case .response(let status, let headers, _) = outcome else { return .next }
            if headers["X-Bad"] != nil { return .fail }
            return status == 418 ? .retry : .next
        }
    }

    @Test func responseValidatorsJoinEveryChain() async throws {
        let counters = NIOLockedValueBox(0)
        let upstream = RecordingUpstream { request in
            let n = counters.withLockedValue { $0 += 1; return $0 }
            if request.uri == "/bad" { return .respond(status: 200, headers: [("X-Bad", "1")], body: []) }
            return .respond(status: n == 1 ? 418 : 200, headers: [], body: Array("try \(n)".utf8))
        }
        let port = try await upstream.start()
        let config = try ConfigLoader.load(yaml: """
            listeners: [{address: 127.0.0.1:0}]
            upstreams: {legacy: {url: "http://127.0.0.1:\(port)"}}
            routes: [{name: api, upstream: legacy, retry: {attempts: 2, backoff: {strategy: immediate}}}]
            """).config
        let server = GatewayServer(config: config, validators: [Teapots()], threads: 1)
        Teardown.register { try? await server.shutdown() }
        let gatewayPort = try await server.start()[0].port!

        #expect(try await curlDetached(["http://127.0.0.1:\(gatewayPort)/tea"]).text == "try 2")
        let bad = try await curlDetached(["-i", "http://127.0.0.1:\(gatewayPort)/bad"]).text
        #expect(bad.hasPrefix("HTTP/1.1 502 Bad Gateway\r\n"))
        #expect(bad.contains("the response of upstream legacy (upstream status 200) did not pass the route's checks") && !bad.contains("Teapots"))
    }
}

/// An embedder's access lines (JSON), read back as text values.
final class AccessLines: Sendable {
    private let bytes = NIOLockedValueBox<[UInt8]>([])

    var add: @Sendable ([UInt8]) -> Void { { [bytes] lines in bytes.withLockedValue { $0 += lines } } }

    /// The lines so far, once there are `count` (they are flushed every 100 ms).
    func entries(count: Int) async throws -> [[String: String]] {
        let lines = { self.bytes.withLockedValue { $0 }.split(separator: UInt8(ascii: "\n")) }
        guard await eventually(timeout: 5, { lines().count >= count }) else { return [] }
        return try lines().map { line in
            let object = try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any] ?? [:]
            return object.mapValues { $0 is NSNull ? "null" : "\($0)" }
        }
    }
}
