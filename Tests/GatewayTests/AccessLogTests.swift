import Foundation
import Testing
@testable import Gateway

/// The access log on the wire: one line per call across a reload, a
/// reopen (logrotate) and SIGTERM.
@Suite(.ownThreads) struct AccessLogTests {
    @Test func everyCallIsOneLineAcrossReloadReopenAndStop() async throws {
        let upstream = RawUpstream { line in
            line.hasPrefix("GET /bad") ? .init("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy")
                : .init("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        }
        let upstreamPort = try await upstream.start()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("access-\(getpid())")
        try? FileManager.default.removeItem(at: directory)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let log = directory.appendingPathComponent("access.log"), rotated = directory.appendingPathComponent("access.log.1")
        let config = directory.appendingPathComponent("gatewayd.yaml")
        func write(timeout: String) throws {
            try """
                listeners: [{address: 127.0.0.1:0}]
                logging: {format: json, access_log: {path: \(log.path)}}
                upstreams: {app: {url: "http://127.0.0.1:\(upstreamPort)"}}
                routes:
                  - name: app
                    upstream: app
                    timeout: \(timeout)
                    validate: [{status: 503, else: next, then: fail}]
                """.write(to: config, atomically: true, encoding: .utf8)
        }
        try write(timeout: "10s")
        let gateway = try SpawnedGateway(config: config.path)
        defer { gateway.stop() }
        let base = "http://127.0.0.1:\(gateway.port)"

        var calls = 0
        for round in 0..<3 {
            for i in 0..<20 {
                _ = try curl(["-s", "-A", "probe/1", "\(base)/ok/\(round)/\(i)"])
                calls += 1
            }
            _ = try curl(["-s", "--http2-prior-knowledge", "\(base)/bad/\(round)"])
            calls += 1
            if round == 0 {
                try write(timeout: "20s")
                gateway.signal(SIGHUP)
            } else if round == 1 {
                // The lines so far reach the file before it moves (flushed within 100 ms).
                let written = calls
                #expect(try await eventually(timeout: 10) { try String(contentsOf: log, encoding: .utf8).split(separator: "\n").count >= written })
                try FileManager.default.moveItem(at: log, to: rotated)
                gateway.signal(SIGUSR1)
                _ = await eventually(timeout: 2) { FileManager.default.fileExists(atPath: log.path) }  // reopened now, or at its next line
            }
        }
        gateway.signal(SIGTERM)
        #expect(gateway.waitForExit(timeout: 20) == 0)

        let lines = try [rotated, log].flatMap { file in
            try String(contentsOf: file, encoding: .utf8).split(separator: "\n")
        }
        #expect(lines.count == calls)
        let objects = try lines.map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
        let ok = try #require(objects.first { $0["target"] as? String == "/ok/0/0" })
        #expect(ok["client"] as? String == "127.0.0.1" && ok["proto"] as? String == "HTTP/1.1" && ok["user_agent"] as? String == "probe/1")
        #expect(ok["upstream"] as? String == "app" && ok["upstream_addr"] as? String == "127.0.0.1:\(upstreamPort)")
        #expect(ok["status"] as? Int == 200 && ok["upstream_status"] as? Int == 200 && ok["tries"] as? Int == 1)
        #expect((ok["upstream_ttfb_ms"] as? Double).map { $0 >= 0 } == true)
        // A response the validators refused still logs what the upstream said.
        let bad = try #require(objects.first { $0["target"] as? String == "/bad/2" })
        #expect(bad["proto"] as? String == "h2c" && bad["status"] as? Int == 502 && bad["upstream_status"] as? Int == 503)
    }

    /// An event reads the clock once for everything it touches; on one
    /// keep-alive connection, each call's deadline, duration and
    /// time-to-first-byte still start from its own request, not from an
    /// instant an earlier event read (idle pauses longer than the timeout).
    @Test func eachCallIsTimedFromItsOwnRequest() async throws {
        let upstream = RecordingUpstream { request in
            .respond(status: 200, headers: [], body: Array("ok".utf8), delay: .milliseconds(request.uri == "/slow" ? 400 : 0))
        }
        let upstreamPort = try await upstream.start()
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("timed-\(getpid()).log")
        try? FileManager.default.removeItem(at: log)
        defer { try? FileManager.default.removeItem(at: log) }
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            logging: {format: json, access_log: {path: \(log.path)}}
            upstreams: {app: {url: "http://127.0.0.1:\(upstreamPort)"}}
            routes: [{name: app, upstream: app, timeout: 1s}]
            """)
        let script = """
            import select, socket, sys
            s = socket.create_connection(("127.0.0.1", \(gateway.port)), timeout=10)
            f = s.makefile("rb")
            for i, path in enumerate(["/fast", "/slow", "/fast", "/slow"]):
                # Idle past the route's timeout: a wait for the gateway to write or close, whose deadline is the pause.
                if i and select.select([s], [], [], 1.3)[0]: break
                s.sendall(f"GET {path} HTTP/1.1\\r\\nHost: t\\r\\n\\r\\n".encode())
                status = f.readline().split()[1].decode()
                length = 0
                while (line := f.readline()) not in (b"\\r\\n", b""):
                    if line.lower().startswith(b"content-length:"): length = int(line.split(b":")[1])
                f.read(length)
                print(path, status)
            """
        let out = try await runPeerDetached("/usr/bin/env", ["python3", "-c", script]).text
        await gateway.stop()
        #expect(out == "/fast 200\n/slow 200\n/fast 200\n/slow 200\n", "a stale instant would have timed the calls out: \(out)")

        let lines = try String(contentsOf: log, encoding: .utf8).split(separator: "\n")
        let objects = try lines.map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
        #expect(objects.map { $0["target"] as? String } == ["/fast", "/slow", "/fast", "/slow"])
        for object in objects {
            let duration = try #require(object["duration_ms"] as? Double), ttfb = try #require(object["upstream_ttfb_ms"] as? Double)
            let slow = object["target"] as? String == "/slow"
            // Each from its own request: never the pause before it (1.3 s), never before the upstream's delay.
            #expect(slow ? duration >= 400 && ttfb >= 400 : duration < 400, "\(object)")
            #expect(duration < 1000 && ttfb >= 0 && ttfb <= duration, "\(object)")
        }
    }
}
