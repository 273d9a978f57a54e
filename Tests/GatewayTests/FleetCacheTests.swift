import Foundation
import Testing
@testable import Gateway
import Rewriter

/// `cache: {scope: fleet}`: two gateways (each its own local cache, as two
/// processes have) on one real redis-server, in front of an upstream that
/// counts its calls. What a hostile store may send, and what happens:
///
/// | the store sends | the daemon | test |
/// |---|---|---|
/// | a valid answer another process stored | served, `hit; detail=fleet`, kept locally | `oneEntryServesEveryGateway` |
/// | nothing (down), or nothing in time (paused) | the local cache alone, after at most its `timeout` | `aStoreDownOrStalledLeavesTheLocalCacheAlone` |
/// | a field with CR/LF, a bad name, a per-call field (Set-Cookie) | refused, logged; the call goes upstream | `plantedValuesAreRefused` |
/// | a status out of range, a body past `max_entry_bytes`, 1000 fields, not base64, not JSON, deep nesting | refused; the call goes upstream | `plantedValuesAreRefused` |
/// | a time far ahead, a huge age | read as now, as an age up to 2^31 s: a stale entry, never a trap | `plantedValuesAreRefused` |
///
/// | a client sends | the daemon | test |
/// |---|---|---|
/// | a target naming another key's lock (`/x:lock`) | its own key: locks live under `cache-lock:` | `aClientCannotNameALock` |
@Suite(.ownThreads) struct FleetCacheTests {
    static func gateway(_ upstream: Int, _ redis: RedisServer, ttl: String = "60s") async throws -> GatewayHarness {
        try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            store: {redis: {url: "\(redis.url)", timeout: 200ms, key_prefix: "t:"}}
            cache: {max_bytes: 1MiB, max_entry_bytes: 4KiB}
            upstreams: {legacy: {url: "http://127.0.0.1:\(upstream)"}}
            routes:
              - name: catalog
                match: {prefix: /}
                upstream: legacy
                cache: {ttl: \(ttl), scope: fleet}
            """)
    }

    /// A redis-server (stopped with the test), `upstream` started, and `gateways` gateways on both.
    static func started(_ upstream: RawUpstream, gateways: Int = 1) async throws -> (RedisServer, RawUpstream, [GatewayHarness]) {
        let redis = try RedisServer()
        Teardown.register { redis.stop() }
        let port = try await upstream.start()
        var started: [GatewayHarness] = []
        for _ in 0..<gateways { started.append(try await gateway(port, redis)) }
        return (redis, upstream, started)
    }

    static func get(_ gateway: GatewayHarness, _ path: String, _ options: [String] = []) throws -> CacheWireTests.Answer {
        try CacheWireTests().call(gateway, path, options)
    }

    static func requests(_ upstream: RawUpstream, _ path: String) -> Int {
        upstream.requests.filter { $0.text.hasPrefix("GET \(path) ") }.count
    }

    @Test(arguments: CacheWireTests.protocols) func oneEntryServesEveryGateway(_ options: [String]) async throws {
        let (redis, upstream, gateways) = try await Self.started(RawUpstream { _ in CacheWireTests.answer(#"{"n":1}"#, "Cache-Control: max-age=100\r\nETag: \"v1\"\r\n") }, gateways: 2)
        let (first, second) = (gateways[0], gateways[1])
        let filled = try Self.get(first, "/item", options)
        #expect(filled.status == "200" && filled.fields["cache-status"] == "gatewayd; fwd=miss; stored")
        // Published once the answer ended, beside the call.
        #expect(await eventually(timeout: 10) { (try? redis.cli(["EXISTS", "t:cache:catalog:/item"]))?.contains("1") == true })
        let shared = try Self.get(second, "/item", options)
        #expect(shared.status == "200" && shared.body == #"{"n":1}"#, "\(shared)")
        #expect(shared.fields["cache-status"]?.hasPrefix("gatewayd; hit; ttl=") == true && shared.fields["cache-status"]?.hasSuffix("; detail=fleet") == true,
                "\(shared.fields)")
        #expect(shared.fields["etag"] == "\"v1\"" && shared.fields["age"] != nil)
        // Kept locally now: the next hit asks nothing of the store.
        #expect(try Self.get(second, "/item", options).fields["cache-status"]?.hasSuffix("detail=fleet") == false)
        #expect(Self.requests(upstream, "/item") == 1)
        // The value is the documented one: fresh-until, a line, then the answer as JSON.
        let value = try redis.cli(["GET", "t:cache:catalog:/item"])
        #expect(value.hasPrefix(String(HTTPDate.now() + 90).prefix(6)) && value.contains(#""status":200"#), "\(value)")
    }

    /// Twenty misses on two gateways for one cold key of a slow upstream: one upstream call.
    @Test func missesOnTwoGatewaysMakeOneUpstreamCall() async throws {
        let (_, upstream, gateways) = try await Self.started(CacheWireTests.slow(CacheWireTests.answer(#"{"cold":true}"#, "Cache-Control: max-age=60\r\n")), gateways: 2)
        let (first, second) = (gateways[0], gateways[1])
        async let one = CacheWireTests().crowd(first, "/cold", count: 10, [])
        async let two = CacheWireTests().crowd(second, "/cold", count: 10, [])
        let answers = try await one + two
        #expect(answers.count == 20 && answers.allSatisfy { $0.hasPrefix("200 ") }, "\(answers)")
        #expect(Self.requests(upstream, "/cold") == 1, "\(answers)")
    }

    @Test func aStoreDownOrStalledLeavesTheLocalCacheAlone() async throws {
        let (redis, upstream, gateways) = try await Self.started(RawUpstream { _ in CacheWireTests.answer(#"{"up":1}"#, "Cache-Control: max-age=100\r\n") })
        let gateway = gateways[0]
        // Stalled: the store takes the call's command and never answers; the call goes upstream after the store's timeout.
        redis.pause()
        let stalled = try Self.get(gateway, "/stalled")
        redis.resume()
        #expect(stalled.status == "200" && stalled.body == #"{"up":1}"# && stalled.fields["cache-status"] == "gatewayd; fwd=miss; stored")
        #expect(try Self.get(gateway, "/stalled").fields["cache-status"]?.hasPrefix("gatewayd; hit") == true)
        // Down: the local cache alone, as with scope local.
        redis.stop()
        let down = try Self.get(gateway, "/down")
        #expect(down.status == "200" && down.fields["cache-status"] == "gatewayd; fwd=miss; stored")
        #expect(try Self.get(gateway, "/down").fields["cache-status"]?.hasPrefix("gatewayd; hit") == true)
        #expect(Self.requests(upstream, "/stalled") == 1 && Self.requests(upstream, "/down") == 1)
    }

    static func planted(status: String = "200", fields: String = #"["Content-Type","application/json"],["Cache-Control","max-age=100"]"#,
                        body: String = "eyJwbGFudGVkIjp0cnVlfQ==", storedAt: String? = nil, age: String = "0") -> String {
        "9999999999\n{\"status\":\(status),\"stored_at\":\(storedAt ?? String(HTTPDate.now())),\"age\":\(age),\"vary\":[],\"headers\":[\(fields)],\"body\":\"\(body)\"}"
    }

    static let hostile: [(String, String)] = [
        ("CR/LF in a field", planted(fields: #"["Content-Type","application/json\r\nX-Injected: 1"],["Cache-Control","max-age=100"]"#)),
        ("a bad field name", planted(fields: #"["Bad Name","x"],["Cache-Control","max-age=100"]"#)),
        ("a per-call field", planted(fields: #"["Set-Cookie","session=stolen"],["Cache-Control","max-age=100"]"#)),
        ("a status out of range", planted(status: "999")),
        ("a body past max_entry_bytes", planted(body: String(repeating: "QUFB", count: 2000))),
        ("a thousand fields", planted(fields: Array(repeating: #"["X-A","b"]"#, count: 1000).joined(separator: ","))),
        ("a body not base64", planted(body: "!!!")),
        ("not JSON", "9999999999\n{\"status\":"),
        ("deep nesting", "9999999999\n" + String(repeating: "[", count: 5000)),
        ("no fresh-until", "{\"status\":200}"),
        ("a time far ahead and a huge age", planted(storedAt: "9223372036854775807", age: "9223372036854775807")),
    ]

    @Test func aClientCannotNameALock() async throws {
        let (redis, _, gateways) = try await Self.started(RawUpstream { _ in CacheWireTests.answer(#"{"n":1}"#, "Cache-Control: max-age=100\r\n") })
        let gateway = gateways[0]
        // Another process holds /x's lock; a client asks for /x:lock, whose value key must not be that lock.
        _ = try redis.cli(["SET", "t:cache-lock:catalog:/x", "holder", "PX", "60000"])
        #expect(try Self.get(gateway, "/x:lock").status == "200")
        #expect(await eventually(timeout: 10) { (try? redis.cli(["EXISTS", "t:cache:catalog:/x:lock"]))?.contains("1") == true })
        #expect(try redis.cli(["GET", "t:cache-lock:catalog:/x"]).contains("holder"))
    }

    /// `gatewayd explain` names the store's key a fleet route's local miss asks for.
    @Test func explainNamesTheStoresKey() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-explain-\(getpid()).yaml")
        try """
            listeners: [{address: 127.0.0.1:8080}]
            store: {redis: {url: "redis://127.0.0.1:6379/0", key_prefix: "shop:"}}
            routes: [{name: catalog, upstream: echo, cache: {ttl: 60s, key: [query, "header:Accept-Language"], scope: fleet}}]
            """.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let explained = try ExplainCommandTests().run(["explain", "-c", file.path, "-H", "Accept-Language: de", "GET", "/items?page=2"])
        #expect(explained.out.contains(#"# cache: key catalog /items?page=2 accept-language=de; a fresh stored answer is served without this request; "#
            + #"a local miss asks the store for shop:cache:catalog:/items?page=2\nde (its lock: shop:cache-lock:catalog:/items?page=2\nde) first, a miss sends it"#),
                "\(explained.out)")
    }

    /// The documented value (the fuzzer's seed, Fuzz/Corpus/FuzzFleet/cached-answer-value) reads as an answer and back as itself.
    @Test func aValueReadsBackAsWritten() throws {
        let seed = try Data(contentsOf: OpenAPITests.root.appendingPathComponent("Fuzz/Corpus/FuzzFleet/cached-answer-value")).dropFirst(2)
        let now: Int64 = 1_800_000_000
        let answer = try #require(FleetCache.decode(Array(seed), now: now, route: RouteCacheConfig(), maxEntryBytes: 4096))
        #expect(answer.status == 200 && answer.body == Array(#"{"n":1}"#.utf8) && answer.etag == "\"v1\"")
        #expect(answer.age(now: now) == 13 && answer.ttl(now: now) == 87)
        #expect(answer.vary.map(\.name) == ["accept-language"] && answer.vary.map(\.value) == ["de"])
        let again = try #require(FleetCache.decode(Array(FleetCache.encode(answer, now: now).utf8), now: now, route: RouteCacheConfig(), maxEntryBytes: 4096))
        #expect(again.headers == answer.headers && again.body == answer.body && again.age(now: now) == 13 && again.vary.map(\.value) == ["de"])
        #expect(FleetCache.encode(answer, now: now).hasPrefix("1800000087\n"))
        // The same bytes past max_entry_bytes are no answer.
        #expect(FleetCache.decode(Array(seed), now: now, route: RouteCacheConfig(), maxEntryBytes: 4) == nil)
    }

    @Test func plantedValuesAreRefused() async throws {
        let (redis, upstream, gateways) = try await Self.started(RawUpstream { _ in CacheWireTests.answer(#"{"real":true}"#, "Cache-Control: max-age=100\r\n") })
        let gateway = gateways[0]
        // The control: a well-formed planted value is served, so the refusals below are the checks', not the format's.
        _ = try redis.cli(["SET", "t:cache:catalog:/control", Self.planted()])
        let control = try Self.get(gateway, "/control")
        #expect(control.body == #"{"planted":true}"# && control.fields["cache-status"]?.hasSuffix("detail=fleet") == true, "\(control)")
        for (index, (row, value)) in Self.hostile.enumerated() {
            let path = "/hostile\(index)"
            _ = try redis.cli(["SET", "t:cache:catalog:\(path)", value])
            let answer = try Self.get(gateway, path)
            #expect(answer.status == "200" && answer.body == #"{"real":true}"#, "\(row): \(answer)")
            #expect(answer.fields["x-injected"] == nil && answer.fields["set-cookie"] == nil, "\(row)")
            #expect(Self.requests(upstream, path) == 1, "\(row)")
        }
        // The daemon lives, and the store's entries are the upstream's now.
        #expect(try Self.get(gateway, "/hostile0").body == #"{"real":true}"#)
    }
}
