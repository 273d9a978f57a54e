import CoreMetrics
import Foundation
import Testing
@testable import Gateway

/// Per-route rate limits: the token bucket as a value, the limiter's memory
/// bound, and on the wire a burst that gets exactly its allowance.
@Suite(.ownThreads) struct RateLimitTests {
    @Test func aBucketRefillsContinuouslyUpToItsCapacity() {
        var bucket = TokenBucket(capacity: 3, now: 0)
        #expect((0..<3).allSatisfy { _ in bucket.take(now: 0, rate: 1, capacity: 3) == nil })
        #expect(bucket.take(now: 0, rate: 1, capacity: 3) == 1)
        #expect(bucket.take(now: 0.5, rate: 1, capacity: 3) == 0.5)
        #expect(bucket.take(now: 1, rate: 1, capacity: 3) == nil)
        // A long quiet refills to the capacity, no further.
        #expect(bucket.isIdle(now: 100, rate: 1, capacity: 3))
        #expect((0..<3).allSatisfy { _ in bucket.take(now: 100, rate: 1, capacity: 3) == nil })
        #expect(bucket.take(now: 100, rate: 1, capacity: 3) != nil)
    }

    @Test func theLimiterKeepsAtMostMaxKeys() {
        var config = RateLimitConfig(requests: 1, per: .seconds(60))
        config.maxKeys = 100
        let limiter = RateLimiter(config: config, route: "r", factory: NOOPMetricsHandler.instance, store: nil)
        for key in 0..<1000 {
            guard case .allowed = limiter.check("k\(key)", now: 0) else { Issue.record("k\(key) refused"); return }
        }
        #expect(limiter.trackedKeys <= 100)
        // A key still tracked is still limited.
        guard case .refused = limiter.check("k999", now: 0) else { Issue.record("k999 admitted twice"); return }
    }

    @Test func aBurstGetsExactlyItsAllowanceThen429sAndRecovers() async throws {
        let upstream = RecordingUpstream()
        let port = try await upstream.start()
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            logging: {access_log: false}
            upstreams: {app: {url: "http://127.0.0.1:\(port)"}}
            routes:
              - {name: slow, match: {prefix: /slow}, upstream: app, rate_limit: {requests: 5, per: 60s, burst: 2}}
              - {name: keyed, match: {prefix: /keyed}, upstream: app, rate_limit: {requests: 2, per: 1s, key: "header:X-Api-Key"}}
            """)
        let codes = try EndpointsWireTests.calls(20, "\(gateway.base)/slow")
        #expect(codes == Array(repeating: "200", count: 7) + Array(repeating: "429", count: 13))
        #expect(upstream.requests.filter { $0.uri == "/slow" }.count == 7)
        let refused = try curl(["-s", "-i", "\(gateway.base)/slow"]).text
        #expect(refused.hasPrefix("HTTP/1.1 429 "))
        #expect(refused.contains("urn:gatewayd:problem:rate-limited"))
        // One token in 12 s (5 per 60 s): the next is at most 12 s away.
        let retryAfter = refused.firstMatch(of: /Retry-After: (\d+)\r\n/).flatMap { Int($0.output.1) }
        #expect(retryAfter.map { (1...12).contains($0) } == true)
        #expect(refused.contains("RateLimit-Policy: \"slow\";q=5;w=60\r\n") && refused.contains("RateLimit: \"slow\";r=0;t=\(retryAfter ?? 0)\r\n"))
        // Per key: each API key has its own allowance, and it comes back after the window.
        for key in ["a", "b"] {
            let keyed = try EndpointsWireTests.calls(3, "\(gateway.base)/keyed", headers: ["X-Api-Key: \(key)"])
            #expect(keyed == ["200", "200", "429"], "\(key)")
        }
        // Both of key a's tokens come back (a refused call spends none).
        for _ in 0..<2 {
            #expect(try await eventually(timeout: 5) { try EndpointsWireTests.calls(1, "\(gateway.base)/keyed", headers: ["X-Api-Key: a"]) == ["200"] })
        }
    }

    /// 100,000 distinct 8 KB keys on one keep-alive connection to the built
    /// binary: the limiter keeps a key's hash, not its bytes, so `max_keys`
    /// bounds its memory (whole keys took 8 KB each). Its table takes 16
    /// bytes a slot; 101,000 keys is just past a doubling (at 98,304), when
    /// the process still holds the old table's pages: ~65 bytes a key, so
    /// the bound is 100.
    @Test func longKeysCostTheLimiterAFewBytesEach() throws {
        let gateway = try SpawnedGateway(yaml: """
            listeners: [{address: 127.0.0.1:0}]
            logging: {access_log: false}
            routes: [{name: keyed, upstream: echo, rate_limit: {requests: 1, per: 60s, key: "header:X-Api-Key"}}]
            """)
        defer { gateway.stop() }
        // A tenth of the bulk figure (scripts/bench's memory table has the 100,000): the bound is per key.
        let keys = 10_000
        // Warm up first: the buffers a long head needs, then the measure.
        let script = """
            import os, socket, sys, threading
            def run(first, count):
                s = socket.create_connection(("127.0.0.1", \(gateway.port)))
                pad = "k" * 8180
                def send():
                    batch = []
                    for i in range(first, first + count):
                        batch.append(("HEAD /x HTTP/1.1\\r\\nHost: a\\r\\nX-Api-Key: %s%010d\\r\\n\\r\\n" % (pad, i)).encode())
                        if len(batch) == 64:
                            s.sendall(b"".join(batch)); batch = []
                    if batch: s.sendall(b"".join(batch))
                writer = threading.Thread(target=send); writer.start()
                seen, rest = 0, b""
                while seen < count:
                    data = s.recv(1 << 20)
                    if not data: break
                    rest += data
                    seen += rest.count(b"HTTP/1.1 200 ")
                    rest = rest[rest.rfind(b"HTTP/1.1 200 ") + 1:] if b"HTTP/1.1 200 " in rest else rest[-16:]
                writer.join()
                s.close()
                return seen
            # Two connections (the daemon runs two event loops), each half the keys.
            first, count = int(sys.argv[1]), int(sys.argv[2])
            if os.fork() == 0:
                os._exit(0 if run(first, count // 2) == count // 2 else 1)
            seen = run(first + count // 2, count - count // 2)
            print(seen + (count // 2 if os.wait()[1] == 0 else 0))
            """
        #expect(try runPeer("/usr/bin/env", ["python3", "-c", script, "0", "1000"]).text == "1000\n")
        let before = try gateway.residentBytes()
        #expect(try runPeer("/usr/bin/env", ["python3", "-c", script, "1000", "\(keys)"]).text == "\(keys)\n")
        let growth = try gateway.residentBytes() - before
        #expect(growth < 100 * keys, "RSS grew \(growth / keys) bytes a key over \(keys) keys of 8 KB")
    }
}
