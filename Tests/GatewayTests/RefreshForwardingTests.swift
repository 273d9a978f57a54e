import Foundation
import MetricsTestKit
import NIOConcurrencyHelpers
import Testing
@testable import Gateway

/// Refresh-then-retry, replays and Retry-After on real sockets: a token
/// service and an upstream that only takes the latest token.
@Suite(.ownThreads) struct RefreshForwardingTests {
    @Test func refreshOnceForConcurrentCallersThenReuse() async throws {
        let issued = NIOLockedValueBox(0)
        let auth = RecordingUpstream { request in
            guard request.uri == "/token" else { return .respond(status: 500, headers: [], body: Array("token service down".utf8)) }
            let n = issued.withLockedValue { $0 += 1; return $0 }
            // Slow enough that every concurrent caller is refused before it answers.
            return .respond(status: 200, headers: [("Content-Type", "application/json")],
                            body: Array(#"{"token_type":"bearer","access_token":"tok-\#(n)"}"#.utf8), delay: .milliseconds(300))
        }
        let app = RecordingUpstream { request in
            let current = "Bearer tok-\(issued.withLockedValue { $0 })"
            if request.uri.hasPrefix("/stale") || request.header("Authorization") != [current] {
                return .respond(status: 401, headers: [], body: Array("who are you".utf8))
            }
            return .respond(status: 200, headers: [], body: Array("secret data".utf8))
        }
        let authPort = try await auth.start(), appPort = try await app.start()
        let metrics = TestMetrics()
        let refresh = { (path: String) in """
                validate:
                  - status: 401
                    then:
                      refresh:
                        request:
                          upstream: auth
                          path: \(path)
                          headers: {set: {X-Client: gatewayd}}
                          body: {client_id: gatewayd, client_secret: "${env:GATEWAYD_TEST_CLIENT_SECRET}"}
                        capture: {pointer: /access_token, header: Authorization, format: "Bearer {}"}
                        min_interval: 1m
            """
        }
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            upstreams:
              app: {url: "http://127.0.0.1:\(appPort)"}
              auth: {url: "http://127.0.0.1:\(authPort)"}
            routes:
              - name: broken
                match: {prefix: /broken}
                upstream: app
                retry: {attempts: 2}
            \(refresh("/no-such-token-endpoint"))
              - name: stale
                match: {prefix: /stale}
                upstream: app
                retry: {attempts: 2}
            \(refresh("/token"))
              - name: protected
                upstream: app
                retry: {attempts: 2}
            \(refresh("/token"))
            """, metrics: metrics, environment: ["GATEWAYD_TEST_CLIENT_SECRET": "s3cret"])

        // Ten callers at once: all refused, one token call, all replayed with it.
        var arguments = ["-s", "-Z", "--parallel-immediate", "--parallel-max", "10", "-w", "%{http_code}\n"]
        for i in 1...10 { arguments += ["\(gateway.base)/data/\(i)", "-o", "/dev/null"] }
        let statuses = try runPeer("/usr/bin/curl", arguments).text.split(separator: "\n")
        #expect(statuses == Array(repeating: "200", count: 10))
        let tokenCalls = auth.requests.filter { $0.uri == "/token" }
        #expect(tokenCalls.count == 1)
        #expect(tokenCalls.first?.method == "POST")
        #expect(tokenCalls.first?.header("X-Client") == ["gatewayd"])
        #expect(tokenCalls.first?.header("Content-Type") == ["application/json"])
        #expect(tokenCalls.first.map { String(decoding: $0.body, as: UTF8.self) } == #"{"client_id":"gatewayd","client_secret":"s3cret"}"#)
        let first = app.requests.filter { $0.uri.hasPrefix("/data/") }
        #expect(first.count == 20)
        #expect(first.filter { $0.header("Authorization").isEmpty }.count == 10)
        #expect(first.filter { $0.header("Authorization") == ["Bearer tok-1"] }.count == 10)

        // Later calls carry the captured credential from their first try.
        let later = try curl(["-i", "\(gateway.base)/data/later"]).text
        #expect(later.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(app.requests.filter { $0.uri == "/data/later" }.map { $0.header("Authorization") } == [["Bearer tok-1"]])

        // A credential the upstream keeps refusing: one refresh, then the
        // upstream's own 401; within min_interval no further token call.
        for _ in 1...3 { #expect(try curl(["-i", "\(gateway.base)/stale"]).text.hasPrefix("HTTP/1.1 401 Unauthorized\r\n")) }
        #expect(auth.requests.filter { $0.uri == "/token" }.count == 2)

        // A refresh that fails fails the call with a clear 502.
        let broken = try curl(["-i", "\(gateway.base)/broken"]).text
        #expect(broken.hasPrefix("HTTP/1.1 502 Bad Gateway\r\n"))
        #expect(broken.contains(#""type":"urn:gatewayd:problem:refresh-failed""#))
        #expect(broken.contains("refreshing through upstream auth failed: the refresh call answered 500"))

        #expect(try metrics.expectCounter("gatewayd_refresh_calls_total", [("route", "protected"), ("result", "ok")]).totalValue == 1)
        #expect(try metrics.expectCounter("gatewayd_refresh_calls_total", [("route", "broken"), ("result", "failed")]).totalValue == 1)
        #expect(try metrics.expectCounter("gatewayd_refreshes_total", [("route", "stale"), ("result", "throttled")]).totalValue == 2)
        #expect(try metrics.expectCounter("gatewayd_upstream_tries_total", [("route", "protected"), ("upstream", "app")]).totalValue == 21)
        #expect(try metrics.expectCounter("gatewayd_requests_total", [("route", "protected"), ("method", "GET"), ("status_class", "2xx")])
            .totalValue == 11)
    }

    @Test func postIsReplayedByteForByteWhenAllowedAndRetryAfterHonored() async throws {
        let upstream = RecordingUpstream.counting { _, n in
            if n == 1 { return .respond(status: 503, headers: [("Retry-After", "1")], body: Array("busy".utf8)) }
            return .respond(status: 200, headers: [], body: Array("done".utf8))
        }
        let port = try await upstream.start()
        let metrics = TestMetrics()
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            upstreams: {app: {url: "http://127.0.0.1:\(port)"}}
            routes:
              - name: orders
                match: {prefix: /orders}
                upstream: app
                retry: {attempts: 2, on: [503], methods: [POST], backoff: {strategy: immediate}}
              - name: polite
                upstream: app
                timeout: 10s
                retry: {attempts: 2, on: [503], retry_after: honor, backoff: {strategy: fixed, base: 10ms}}
            """, metrics: metrics)

        var body = Array(#"{"order":"#.utf8) + (0..<2000).map { UInt8(ascii: "a") + UInt8($0 % 26) } + Array("\"}".utf8)
        body += [0x00, 0xff, 0x0d, 0x0a]
        let bodyFile = FileManager.default.temporaryDirectory.appendingPathComponent("gatewayd-replay-\(port).bin")
        try Data(body).write(to: bodyFile)
        defer { try? FileManager.default.removeItem(at: bodyFile) }
        let post = try curl(["-i", "\(gateway.base)/orders", "-H", "Content-Type: application/octet-stream", "--data-binary", "@\(bodyFile.path)"]).text
        #expect(post.hasPrefix("HTTP/1.1 200 OK\r\n"))
        let tries = upstream.requests.filter { $0.uri == "/orders" }
        #expect(tries.count == 2)
        #expect(tries.allSatisfy { $0.method == "POST" && $0.body == body })
        #expect(tries.map { $0.header("Content-Length") } == [["\(body.count)"], ["\(body.count)"]])

        let started = ContinuousClock.now
        let polite = try curl(["-i", "\(gateway.base)/polite"]).text
        let waited = ContinuousClock.now - started
        #expect(polite.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(waited >= .milliseconds(900), "Retry-After: 1 waits a second, not the 10ms backoff")
        #expect(try metrics.expectCounter("gatewayd_retries_total", [("route", "polite"), ("reason", "status-503")]).totalValue == 1)
    }
}
