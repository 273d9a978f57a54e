import Foundation
import Testing
@testable import Gateway

/// The access log on the wire: one line per call across a reload, a
/// reopen (logrotate) and SIGTERM.
@Suite struct AccessLogTests {
    @Test func everyCallIsOneLineAcrossReloadReopenAndStop() async throws {
        let upstream = RawUpstream { line in
            line.hasPrefix("GET /bad") ? .init("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy")
                : .init("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        }
        let upstreamPort = try await upstream.start()
        defer { Task { await upstream.stop() } }
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
                usleep(300_000)  // the lines so far reach the file before it moves
                try FileManager.default.moveItem(at: log, to: rotated)
                gateway.signal(SIGUSR1)
                usleep(100_000)
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
}
