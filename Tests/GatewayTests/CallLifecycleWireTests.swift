import Foundation
import NIOConcurrencyHelpers
import Testing
@testable import Gateway

/// The call's lifecycle on real sockets: nothing is sent twice unasked, and
/// a client that resets streams as fast as it can neither crashes the daemon
/// nor goes unlogged. (That a timer of one call never acts on another is
/// CallRunnerEmbeddedTests', where time passes by hand.)
@Suite(.ownThreads) struct CallLifecycleWireTests {
    @Test func aRequestResetAfterTheUpstreamReadItIsNotSentAgain() async throws {
        let upstream = RawUpstream { line in
            if line.contains("/warm") { return .init("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nwarm") }
            // Read, then the connection drops with no response.
            return .init("", close: true)
        }
        let port = try await upstream.start()
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            upstreams: {app: {url: "http://127.0.0.1:\(port)"}}
            routes:
              - {name: only-503, match: {prefix: /get/}, upstream: app, retry: {attempts: 3, on: [503]}}
              - {name: plain, match: {prefix: /post/}, upstream: app}
            """)

        let status = ["-s", "-o", "/dev/null", "-w", "%{http_code} %{num_connects}\n"]
        let get = try curl(status + ["\(gateway.base)/get/warm", "--next"] + status + ["\(gateway.base)/get/reset"]).text
        #expect(get == "200 1\n502 0\n")
        let post = try curl(status + ["\(gateway.base)/post/warm", "--next"] + status + ["-d", "x=1", "\(gateway.base)/post/reset"]).text
        #expect(post == "200 1\n502 0\n")
        let requests = upstream.requests
        #expect(requests.filter { $0.text.hasPrefix("GET /get/reset ") }.count == 1)
        #expect(requests.filter { $0.text.hasPrefix("POST /post/reset ") }.count == 1)
        // Each reset request went out on the connection its warm-up kept alive.
        let warmGet = requests.first { $0.text.hasPrefix("GET /get/warm ") }
        #expect(requests.first { $0.text.hasPrefix("GET /get/reset ") }?.connection == warmGet?.connection)
    }

    @Test func rapidResetAgainstAKeepAliveUpstreamLeavesTheDaemonUpAndLogsEachCall() async throws {
        let upstream = RecordingUpstream { _ in .respond(status: 200, headers: [], body: Array("slow".utf8), delay: .milliseconds(100)) }
        let upstreamPort = try await upstream.start()
        let gateway = try SpawnedGateway(yaml: """
            listeners: [{address: 127.0.0.1:0}]
            upstreams: {app: {url: "http://127.0.0.1:\(upstreamPort)", max_connections: 2}}
            routes: [{name: app, upstream: app}]
            """)
        defer { gateway.stop() }

        // Connections one after another, each 1,000 HEADERS + RST_STREAM(CANCEL)
        // pairs, for at most 6 seconds or 20 connections.
        let end = Date().addingTimeInterval(6)
        var connections = 0, pairs = 0
        while Date() < end, connections < 20 {
            let client = try NGHTTP2Client(port: gateway.port)
            var bytes: [UInt8] = []
            for n in 0..<1000 {
                let stream = UInt32(2 * n + 1)
                let block = client.encodeHeaderBlock([(":method", "GET"), (":path", "/r/\(n)"), (":scheme", "http"), (":authority", "x")])
                bytes += NGHTTP2Client.frame(type: 0x1, flags: 0x5, stream: stream, payload: block)
                bytes += NGHTTP2Client.frame(type: 0x3, flags: 0, stream: stream, payload: [0, 0, 0, 8])
            }
            client.sendRaw(bytes)
            client.readRaw(seconds: 2) { $0.rawFrames.contains { $0.type == 0x7 } }
            // GOAWAY(ENHANCE_YOUR_CALM) names the last stream the gateway acted
            // on (RFC 9113 §6.8), not 0: the 201st reset is stream 401.
            #expect(client.rawFrames.contains { $0.type == 0x7 && $0.errorCode == 0xb })
            #expect(client.goAwayLastStreamIDs.first.map { (201...2001).contains($0) } == true, "\(client.goAwayLastStreamIDs)")
            connections += 1
            pairs += 1000
        }
        #expect(gateway.process.isRunning)
        #expect(try gateway.residentBytes() < 256 << 20)
        // A normal call right after is answered.
        let normal = try curl(["-s", "--max-time", "10", "http://127.0.0.1:\(gateway.port)/normal"])
        #expect(normal.text == "slow")
        #expect(gateway.process.isRunning)
        // Calls whose stream was reset are logged with their outcome.
        let resetLines = gateway.log.split(separator: "\n").filter { $0.contains("outcome=client-gone") }
        #expect(resetLines.count > 0, "\(pairs) reset pairs sent")
        #expect(resetLines.first?.contains("status=499") == true)
    }

    @Test func aReloadKeepsTheCredentialARouteCaptured() async throws {
        let issued = NIOLockedValueBox(0)
        let auth = RecordingUpstream { _ in
            let n = issued.withLockedValue { $0 += 1; return $0 }
            return .respond(status: 200, headers: [], body: Array(#"{"access_token":"tok-\#(n)"}"#.utf8))
        }
        let app = RecordingUpstream { request in
            request.header("Authorization") == ["Bearer tok-1"]
                ? .respond(status: 200, headers: [], body: Array("data".utf8)) : .respond(status: 401, headers: [], body: [])
        }
        let authPort = try await auth.start(), appPort = try await app.start()
        let yaml = { (extra: String) in """
            listeners: [{address: 127.0.0.1:0}]
            upstreams:
              app: {url: "http://127.0.0.1:\(appPort)"}
              auth: {url: "http://127.0.0.1:\(authPort)"}
            routes:
            \(extra)
              - name: protected
                upstream: app
                retry: {attempts: 2}
                validate:
                  - status: 401
                    then:
                      refresh:
                        request: {upstream: auth, path: /token}
                        capture: {pointer: /access_token, header: Authorization, format: "Bearer {}"}
            """
        }
        let gateway = try await GatewayHarness.start(yaml(""))
        #expect(try curl(["-s", "\(gateway.base)/x"]).text == "data")
        #expect(issued.withLockedValue { $0 } == 1)

        // A reload that changes another route, not this one's refresh.
        try await gateway.server.reload(try ConfigLoader.load(yaml: yaml("  - {name: added, match: {prefix: /added}, upstream: echo}")).config)
        #expect(try curl(["-s", "\(gateway.base)/added"]).text.contains("/added"))
        #expect(try curl(["-s", "\(gateway.base)/x"]).text == "data")
        #expect(issued.withLockedValue { $0 } == 1)
        #expect(app.requests.count == 3)  // 401, the retry with tok-1, then tok-1 at once
    }

    @Test func aFailedTryTellsTheClientLittleAndTheLogEverything() async throws {
        let gateway = try SpawnedGateway(yaml: """
            listeners: [{address: 127.0.0.1:0}]
            upstreams: {down: {url: "http://127.0.0.1:1"}}
            routes: [{name: down, upstream: down}]
            """)
        defer { gateway.stop() }
        let body = try curl(["-s", "http://127.0.0.1:\(gateway.port)/x"]).text
        #expect(body.contains(#""detail":"upstream down: could not connect""#), "\(body)")
        #expect(!body.contains("127.0.0.1") && !body.contains("errno"))
        var line: Substring?
        _ = await eventually(timeout: 10) {
            line = gateway.log.split(separator: "\n").first { $0.contains("outcome=gateway") }
            return line != nil
        }
        #expect(line?.contains(#"reason="connect-failure: 127.0.0.1:1: connect refused""#) == true, "\(line ?? "no access line")")
        #expect(line?.contains(" tries=1 ") == true, "\(line ?? "no access line")")
    }

    @Test func aResponseCutShortIsOneAccessLine() async throws {
        let upstream = RecordingUpstream { _ in .cutShort(bodyPrefix: Array("partial".utf8), declaredLength: 100) }
        let upstreamPort = try await upstream.start()
        let gateway = try SpawnedGateway(yaml: """
            listeners: [{address: 127.0.0.1:0}]
            upstreams: {app: {url: "http://127.0.0.1:\(upstreamPort)"}}
            routes: [{name: app, upstream: app}]
            """)
        defer { gateway.stop() }
        #expect(try curl(["-s", "http://127.0.0.1:\(gateway.port)/cut"]).status == 18)  // CURLE_PARTIAL_FILE
        // The gateway closes the client's connection after the cut; the line
        // for it must not be followed by a second one ("client-gone") for the same call.
        #expect(try curl(["-s", "http://127.0.0.1:\(gateway.port)/next"]).status == 18)
        _ = await eventually(timeout: 10) { gateway.log.split(separator: "\n").count { $0.contains("gatewayd.access") } >= 2 }
        // A second line for the cut call would come within this bounded wait.
        #expect(!(await eventually(timeout: 0.5) { gateway.log.split(separator: "\n").count { $0.contains("gatewayd.access") } > 2 }))
        let lines = gateway.log.split(separator: "\n").filter { $0.contains("gatewayd.access") }
        #expect(lines.count == 2, "\(lines)")
        #expect(lines.allSatisfy { $0.contains("outcome=cut-short-reset") }, "\(lines)")
    }

    /// A refused answer tells the client no config internals, and the access
    /// line says which check refused it; a malformed request's line names the
    /// client and protocol its connection had.
    @Test func refusalsTellTheClientNoInternalsAndTheAccessLineWhoAndWhy() async throws {
        let upstream = RecordingUpstream { _ in .respond(status: 200, headers: [("Content-Type", "application/json")], body: Array(#"{"status":"error"}"#.utf8)) }
        let port = try await upstream.start()
        let gateway = try SpawnedGateway(yaml: """
            listeners: [{address: 127.0.0.1:0}]
            limits: {max_body_bytes: 16}
            upstreams: {files: {url: "http://127.0.0.1:\(port)"}}
            routes: [{name: files, upstream: files, validate: [{json: {pointer: /status, equals: "ok"}, else: fail}]}]
            """)
        defer { gateway.stop() }
        let refused = try await curlDetached(["-i", "http://127.0.0.1:\(gateway.port)/f"]).text
        #expect(refused.hasPrefix("HTTP/1.1 502 ") && refused.contains(#""detail":"the response of upstream files (upstream status 200) did not pass the route's checks""#))
        #expect(!refused.contains("routes[0]") && !refused.contains("/status"), "\(refused)")
        #expect(await eventually(timeout: 10) { gateway.log.contains(#"reason="routes[0].validate[0] (json /status) refused the response""#) }, "\(gateway.log)")
        let twoHosts = try rawExchange(port: gateway.port, Array("GET /f HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n".utf8))
        #expect(twoHosts.hasPrefix("HTTP/1.1 400 "))
        #expect(await eventually(timeout: 10) {
            gateway.log.split(separator: "\n").contains { $0.contains("status=400") && $0.contains("client=127.0.0.1 proto=HTTP/1.1") && $0.contains("reason=") }
        }, "\(gateway.log)")
        // A body past the limit: the client learns the size, the access line the key.
        let large = try await curlDetached(["-i", "--data-binary", String(repeating: "x", count: 17), "http://127.0.0.1:\(gateway.port)/f"]).text
        #expect(large.hasPrefix("HTTP/1.1 413 ") && large.contains("(16 bytes)") && !large.contains("limits."), "\(large)")
        #expect(await eventually(timeout: 10) { gateway.log.contains(#"reason="the body exceeds limits.max_body_bytes (16)""#) }, "\(gateway.log)")
    }
}
