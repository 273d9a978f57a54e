import Foundation
import Testing
@testable import Gateway

/// The route cache against the HTTP caching test suite behind
/// cache-tests.fyi (Peers/cache-tests, vendored unmodified; run with Node.js,
/// its origin server behind gatewayd): every test of kind `required` or
/// `optimal` passes, except the ones listed here, each failed on purpose.
@Suite(.ownThreads) struct CacheConformanceTests {
    static let directory = OTLPReceiver.root.appendingPathComponent("Tests/GatewayTests/Peers/cache-tests").path

    /// The tests gatewayd fails by design, and why (docs/caching.md).
    static let expectedFailures: [String: String] = [
        "headers-store-Set-Cookie": "an answer with Set-Cookie is not stored (as nginx and Varnish)",
        "other-set-cookie": "an answer with Set-Cookie is not stored",
        "partial-use-headers": "Range requests are passed through, never answered from the store",
        "partial-use-stored-headers": "Range requests are passed through",
        "partial-store-partial-reuse-partial": "Range requests are passed through",
        "partial-store-complete-reuse-partial": "Range requests are passed through",
        "partial-store-complete-reuse-partial-no-last": "Range requests are passed through",
        "partial-store-complete-reuse-partial-suffix": "Range requests are passed through",
        "partial-store-partial-reuse-partial-byterange": "Range requests are passed through",
        "partial-store-partial-reuse-partial-absent": "Range requests are passed through",
        "partial-store-partial-reuse-partial-suffix": "Range requests are passed through",
        "partial-store-partial-complete": "Range requests are passed through",
        "method-POST": "only GET answers are stored",
        "status-200-must-understand": "must-understand is not implemented: such an answer is stored only when its other directives allow",
        "heuristic-599-cached": "only the RFC 9110 heuristically cacheable statuses get heuristic freshness",
        "freshness-expires-ansi-c": "the suite's asctime date is not one gatewayd takes as exact",
        "vary-normalise-lang-order": "Vary compares values with whitespace removed, nothing more",
        "vary-normalise-lang-case": "Vary compares values with whitespace removed, nothing more",
        "vary-normalise-lang-select": "Vary compares values with whitespace removed, nothing more",
        "conditional-lm-fresh-no-lm": "without Last-Modified, If-Modified-Since goes by Date",
        "interim-not-cached": "the suite needs npm's undici for interim responses",
        "interim-102": "the suite needs npm's undici for interim responses",
        "interim-103": "the suite needs npm's undici for interim responses",
        "interim-no-header-reuse": "the suite needs npm's undici for interim responses",
    ]

    @Test func theHTTPCacheTestsPass() async throws {
        let pidfile = FileManager.default.temporaryDirectory.appendingPathComponent("cache-tests-\(UUID().uuidString).pid").path
        let origin = try BackgroundPeer("/usr/bin/env", ["npm_config_port=0", "npm_config_protocol=http", "npm_config_pidfile=\(pidfile)",
                                                         "/usr/bin/node", "\(Self.directory)/test-engine/server/server.mjs"])
        defer {
            origin.process.kill()
            try? FileManager.default.removeItem(atPath: pidfile)
        }
        #expect(origin.waitFor("/\n", seconds: 30))
        let port = try #require(origin.output.split(separator: ":").last.flatMap { Int($0.prefix { $0.isNumber }) })
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            upstreams: {origin: {url: "http://127.0.0.1:\(port)"}}
            routes:
              - {name: all, match: {prefix: /}, upstream: origin, cache: {}}
            """)
        let run = try runPeer("/usr/bin/env", ["npm_config_base=\(gateway.base)", "npm_package_config_id=", "/usr/bin/node", "--no-warnings",
                                              "\(Self.directory)/test-engine/cli.mjs"])
        let results = try #require(try JSONSerialization.jsonObject(with: Data(run.out)) as? [String: Any], "\(run.err)")
        let listing = try runPeer("/usr/bin/node", ["--input-type=module", "-e", """
            import suites from '\(Self.directory)/tests/index.mjs'
            for (const suite of suites) for (const test of suite.tests)
              if (!test.browser_only && (test.kind ?? 'required') !== 'check') console.log(test.id)
            """])
        let judged = listing.text.split(separator: "\n").map(String.init)
        #expect(judged.count > 200, "\(listing.err)")
        for id in judged {
            let passed = results[id] as? Bool == true
            if let why = Self.expectedFailures[id] {
                #expect(!passed, "\(id) passes now (it failed because \(why)): take it off the list")
            } else {
                #expect(passed, "\(id): \(results[id].map { "\($0)" } ?? "no result")")
            }
        }
    }
}
