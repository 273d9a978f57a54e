import Foundation
import Testing
@testable import Gateway

/// The cache as an operator runs it: the daemon's access line and metrics,
/// the admin's purge behind its token, a reload that keeps what did not
/// change, and memory held to `cache.max_bytes` under ten times that much content.
@Suite(.ownThreads) struct CacheOperationsTests {
    static func config(_ upstream: Int, catalogTTL: String = "60s", maxBytes: String = "4MiB") -> String {
        """
        listeners: [{address: 127.0.0.1:0}]
        admin: {address: 127.0.0.1:0, token: "${env:GATEWAYD_ADMIN_TOKEN}"}
        logging: {format: logfmt}
        cache: {max_bytes: \(maxBytes), max_entry_bytes: 256KiB}
        upstreams: {legacy: {url: "http://127.0.0.1:\(upstream)"}}
        routes:
          - {name: catalog, match: {prefix: /catalog}, upstream: legacy, cache: {ttl: \(catalogTTL)}}
          - {name: users, match: {prefix: /users}, upstream: legacy, cache: {ttl: 60s}}
        """
    }

    static let token = "tok-\(UInt64.random(in: 1...UInt64.max))-0123456789"

    func cacheStatus(_ gateway: SpawnedGateway, _ path: String) throws -> String {
        let head = try curl(["-s", "-D", "-", "-o", "/dev/null", "http://127.0.0.1:\(gateway.port)\(path)"]).text
        return head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("cache-status:") }.map { String($0.dropFirst(14)) } ?? ""
    }

    @Test func purgeLogAndMetricsAndAReloadThatKeepsWhatDidNotChange() async throws {
        let upstream = RawUpstream { _ in .init("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}") }
        let port = try await upstream.start()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("gatewayd-cache-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).yaml")
        try Self.config(port).write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let gateway = try SpawnedGateway(config: file.path, environment: ["GATEWAYD_ADMIN_TOKEN": Self.token])
        defer { gateway.stop() }
        let admin = "http://127.0.0.1:\(try #require(gateway.adminPort))"
        for path in ["/catalog?p=1", "/catalog?p=2", "/users/1"] {
            #expect(try cacheStatus(gateway, path) == "gatewayd; fwd=miss; stored")
            #expect(try cacheStatus(gateway, path).hasPrefix("gatewayd; hit; ttl="))
        }
        #expect(await eventually(timeout: 10) { gateway.log.contains("cache=hit") && gateway.log.contains("cache=miss") })
        let metrics = try curl(["\(admin)/metrics"]).text
        #expect(metrics.contains(#"gatewayd_cache_lookups_total{route="catalog",result="hit"} 2"#), "\(metrics)")
        #expect(metrics.contains("gatewayd_cache_stored_bytes "))
        // The purge is behind the admin token, as /reload is.
        #expect(try curl(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "DELETE", "\(admin)/cache"]).text == "401")
        let purge = { (query: String) in
            try curl(["-s", "-X", "DELETE", "-H", "Authorization: Bearer \(Self.token)", "\(admin)/cache\(query)"]).text
        }
        #expect(try purge("?uri=%2Fcatalog%3Fp%3D1") == #"{"purged":1}"#)
        #expect(try cacheStatus(gateway, "/catalog?p=1") == "gatewayd; fwd=miss; stored")
        #expect(try purge("?route=users") == #"{"purged":1}"#)
        #expect(try cacheStatus(gateway, "/users/1") == "gatewayd; fwd=miss; stored")
        // A reload that changes catalog's cache purges its entries and keeps users'.
        try Self.config(port, catalogTTL: "30s").write(to: file, atomically: true, encoding: .utf8)
        gateway.signal(SIGHUP)
        #expect(await eventually(timeout: 60) { gateway.log.contains("config reloaded") }, "\(gateway.log)")
        #expect(try cacheStatus(gateway, "/users/1").hasPrefix("gatewayd; hit"))
        #expect(try cacheStatus(gateway, "/catalog?p=2") == "gatewayd; fwd=miss; stored")
        #expect(try purge("") == #"{"purged":2}"#)
        #expect(upstream.requests.count == 6)
    }

    @Test func memoryStaysWithinMaxBytesUnderTenTimesAsMuchContent() async throws {
        // Each path a distinct 64 KiB answer: 640 of them are 40 MiB through a 4 MiB cache.
        let body = String(repeating: "x", count: 64 * 1024)
        let upstream = RawUpstream { _ in .init("HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)") }
        let gateway = try SpawnedGateway(yaml: Self.config(try await upstream.start()), environment: ["GATEWAYD_ADMIN_TOKEN": Self.token])
        defer { gateway.stop() }
        // Warmed first, as the content is then served (20 at a time): the connections, buffers and allocator
        // arenas twenty calls use are counted before the cache fills.
        for round in 0..<3 {
            let urls = (0..<20).flatMap { ["-o", "/dev/null", "http://127.0.0.1:\(gateway.port)/users/\(round)-\($0)"] }
            _ = try runPeer("/usr/bin/curl", ["-s", "--max-time", "30", "-Z", "--parallel-immediate"] + urls)
        }
        _ = try curl(["-s", "-X", "DELETE", "-H", "Authorization: Bearer \(Self.token)", "http://127.0.0.1:\(try #require(gateway.adminPort))/cache"])
        let before = try gateway.residentBytes()
        for batch in 0..<32 {
            let urls = (0..<20).flatMap { ["-o", "/dev/null", "http://127.0.0.1:\(gateway.port)/catalog/\(batch)-\($0)"] }
            _ = try runPeer("/usr/bin/curl", ["-s", "--max-time", "30", "-Z", "--parallel-immediate"] + urls)
        }
        let grown = try gateway.residentBytes() - before
        let metrics = try curl(["http://127.0.0.1:\(try #require(gateway.adminPort))/metrics"]).text
        #expect(metrics.contains("gatewayd_cache_evictions_total "), "\(metrics)")
        #expect(grown < 4 * 1024 * 1024 * 11 / 10, "RSS grew \(grown) bytes for a 4 MiB cache")
    }

    @Test func explainPrintsTheKeyAndWhatWouldBeStored() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("explain-cache-\(getpid())-\(UInt32.random(in: 0 ... .max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let answer = directory.appendingPathComponent("answer.http")
        func explain(_ raw: String, _ arguments: [String]) throws -> String {
            try raw.write(to: answer, atomically: true, encoding: .utf8)
            return try ExplainCommandTests().run(["explain", "-c", "config/examples/soap-users.yaml", "--answer", answer.path] + arguments).out
        }
        let user = "HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\nContent-Length: \(AnswerWireTests.user.utf8.count)\r\n\r\n\(AnswerWireTests.user)"
        let stored = try explain(user, ["GET", "/users/7"])
        #expect(stored.contains("# cache: key user /users/7; a fresh stored answer is served without this request, a miss sends it\n"))
        #expect(stored.contains("# on a miss, the cache would store it, fresh for 60s, then served stale on errors for 600s\n"))
        #expect(stored.contains("Cache-Status: gatewayd; fwd=miss; stored\r\n"))
        let refused = try explain(user.replacingOccurrences(of: "Content-Type", with: "Cache-Control: no-store\r\nContent-Type"), ["GET", "/users/7"])
        #expect(refused.contains("# on a miss, the cache would not store it: no-store\n") && refused.contains("Cache-Status: gatewayd; fwd=miss; detail=no-store\r\n"))
        let bypassed = try explain(user, ["-H", "Range: bytes=0-1", "GET", "/users/7"])
        #expect(bypassed.contains("# cache: bypassed") && !bypassed.contains("Cache-Status") && !bypassed.contains("# on a miss"))
    }
}
