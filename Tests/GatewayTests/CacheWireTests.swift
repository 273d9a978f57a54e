import Foundation
import NIOConcurrencyHelpers
import Testing
@testable import Gateway

/// The route cache on the wire, HTTP/1.1 and h2c, against an upstream that
/// records every request it gets: what is stored, served, revalidated,
/// served stale and coalesced.
///
/// | hostile or broken party sends | the client gets | and |
/// |---|---|---|
/// | upstream: `no-store`, `private`, `Set-Cookie`, `Vary: *` | its answer | nothing stored: the next call goes upstream |
/// | client: `Authorization` (upstream gives no `public`/`s-maxage`) | its answer | not stored, never served to another |
/// | client: a body on GET, a `Range` | its own answer | the cache is bypassed |
/// | upstream: an answer past `max_entry_bytes` | its answer, streamed | not stored |
/// | upstream: a 503, or down, behind a stale entry | the stale answer (`stale_if_error`) | `fwd=stale; fwd-status=503` |
/// | upstream: a `304` to a revalidation | the stored body, headers refreshed | one upstream call |
/// | client: an unsafe method on a stored path | its answer | the stored entry is gone |
@Suite(.ownThreads) struct CacheWireTests {
    static let protocols: [[String]] = [[], ["--http2-prior-knowledge"]]

    /// `Date` as the upstream writes it, `ago` seconds back.
    static func date(ago: Int64 = 0) -> String { HTTPDate.format(HTTPDate.now() - ago) }

    static func answer(_ body: String, _ fields: String, status: String = "200 OK") -> RawUpstream.Answer {
        .init("HTTP/1.1 \(status)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\(fields)\r\n\(body)")
    }

    static func gateway(_ port: Int, extra: String = "") async throws -> GatewayHarness {
        try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            cache: {max_bytes: 1MiB, max_entry_bytes: 4KiB}
            upstreams: {legacy: {url: "http://127.0.0.1:\(port)"}}
            routes:
              - name: catalog
                match: {prefix: /}
                upstream: legacy
                response_headers: {add: {X-Served-By: gatewayd}}
                cache: {ttl: 60s, key: [query, "header:Accept-Language"], stale_if_error: 10m\(extra)}
            """)
    }

    struct Answer {
        var status: String
        var fields: [String: String]
        var body: String
    }

    func call(_ gateway: GatewayHarness, _ path: String, _ options: [String], _ extra: [String] = []) throws -> Answer {
        let result = try curl(["-D", "-", "-o", "/dev/stdout"] + options + extra + ["\(gateway.base)\(path)"])
        let text = result.text.replacingOccurrences(of: "\r\n", with: "\n")
        let parts = text.components(separatedBy: "\n\n")
        var fields: [String: String] = [:]
        for line in (parts.first ?? "").split(separator: "\n").dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let status = parts.first?.split(separator: " ").dropFirst().first.map(String.init) ?? ""
        return Answer(status: status, fields: fields, body: parts.dropFirst().joined(separator: "\n\n"))
    }

    func requests(_ upstream: RawUpstream, _ path: String) -> [String] {
        upstream.requests.map(\.text).filter { $0.hasPrefix("GET \(path) ") || $0.hasPrefix("HEAD \(path) ") || $0.hasPrefix("POST \(path) ") }
    }

    @Test(arguments: protocols) func aFreshAnswerIsServedFromTheStoreAndGrowsAge(_ options: [String]) async throws {
        let upstream = RawUpstream { line in
            line.contains("/plain") ? Self.answer(#"{"items":[1,2]}"#, "Date: \(Self.date(ago: 5))\r\n")
                : Self.answer(#"{"n":1}"#, "Cache-Control: max-age=100\r\nDate: \(Self.date())\r\n")
        }
        let gateway = try await Self.gateway(try await upstream.start())
        let first = try call(gateway, "/plain?page=1", options)
        #expect(first.status == "200" && first.body == #"{"items":[1,2]}"#)
        #expect(first.fields["cache-status"] == "gatewayd; fwd=miss; stored")
        let second = try call(gateway, "/plain?page=1", options)
        #expect(second.status == "200" && second.body == first.body)
        #expect(second.fields["cache-status"]?.hasPrefix("gatewayd; hit; ttl=5") == true, "\(second.fields)")
        // Its Date is kept, its Age counts from it; response_headers were applied before storing; the request id is this call's.
        #expect(second.fields["date"] == first.fields["date"] && Int(second.fields["age"] ?? "") ?? 0 >= 5)
        #expect(second.fields["x-served-by"] == "gatewayd" && second.fields["x-request-id"] != first.fields["x-request-id"])
        #expect(second.fields["content-length"] == String(first.body.utf8.count))
        // HEAD is answered from the GET's entry, without a body.
        let head = try curl(["-I"] + options + ["\(gateway.base)/plain?page=1"]).text.lowercased()
        #expect(head.contains("cache-status: gatewayd; hit"))
        #expect(requests(upstream, "/plain?page=1").count == 1)
        // The query and the key's header tell entries apart.
        _ = try call(gateway, "/plain?page=2", options)
        _ = try call(gateway, "/plain?page=1", options, ["-H", "Accept-Language: fr"])
        #expect(requests(upstream, "/plain?page=2").count == 1 && requests(upstream, "/plain?page=1").count == 2)
        // The upstream's own max-age wins over the route's ttl.
        _ = try call(gateway, "/own", options)
        let own = try call(gateway, "/own", options)
        #expect(own.fields["cache-status"]?.hasPrefix("gatewayd; hit; ttl=") == true)
        #expect(Int(String(own.fields["cache-status"]?.split(separator: "=").last ?? "")) ?? 0 > 60)
    }

    @Test(arguments: protocols) func whatMayNotBeStoredGoesUpstreamEveryTime(_ options: [String]) async throws {
        let upstream = RawUpstream { line in
            if line.contains("/nostore") { return Self.answer("{}", "Cache-Control: no-store\r\n") }
            if line.contains("/private") { return Self.answer("{}", "Cache-Control: private, max-age=60\r\n") }
            if line.contains("/cookie") { return Self.answer("{}", "Set-Cookie: session=abc\r\n") }
            if line.contains("/varystar") { return Self.answer("{}", "Vary: *\r\n") }
            if line.contains("/public") { return Self.answer("{}", "Cache-Control: public, max-age=60\r\n") }
            if line.contains("/big") { return Self.answer(String(repeating: "x", count: 5000), "") }
            return Self.answer("{}", "")
        }
        let gateway = try await Self.gateway(try await upstream.start())
        for (path, extra) in [("/nostore", []), ("/private", []), ("/cookie", []), ("/varystar", []), ("/big", []),
                              ("/auth", ["-H", "Authorization: Bearer one"]), ("/body", ["--data-binary", "x", "-X", "GET"]),
                              ("/range", ["-H", "Range: bytes=0-1"])] {
            let first = try call(gateway, path, options, extra)
            let second = try call(gateway, path, options, extra)
            #expect(first.status == "200" && second.status == "200", "\(path)")
            #expect(requests(upstream, path).count == 2, "\(path) was served from the store")
            #expect(second.fields["cache-status"]?.contains("hit") != true, "\(path)")
        }
        // An Authorization answer the upstream calls public is shared.
        _ = try call(gateway, "/public", options, ["-H", "Authorization: Bearer one"])
        let shared = try call(gateway, "/public", options, ["-H", "Authorization: Bearer two"])
        #expect(shared.fields["cache-status"]?.hasPrefix("gatewayd; hit") == true && requests(upstream, "/public").count == 1)
    }

    /// An upstream whose answers follow one another: the first, then the next for every later request.
    static func sequence(_ answers: [RawUpstream.Answer]) -> RawUpstream {
        let served = NIOLockedValueBox(0)
        return RawUpstream { _ in
            let index = served.withLockedValue { count in
                defer { count += 1 }
                return min(count, answers.count - 1)
            }
            return answers[index]
        }
    }

    @Test(arguments: protocols) func aStaleEntryIsRevalidatedAndA304KeepsIt(_ options: [String]) async throws {
        let upstream = Self.sequence([
            // Stale at once: its next use asks the upstream, which says nothing changed.
            Self.answer(#"{"v":1}"#, "Cache-Control: max-age=0\r\nETag: \"v1\"\r\nDate: \(Self.date())\r\n"),
            .init("HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\nCache-Control: max-age=30\r\nX-Version: 2\r\n\r\n"),
        ])
        let gateway = try await Self.gateway(try await upstream.start())
        _ = try call(gateway, "/item", options)
        let revalidated = try call(gateway, "/item", options)
        #expect(revalidated.status == "200" && revalidated.body == #"{"v":1}"#)
        #expect(revalidated.fields["cache-status"] == "gatewayd; fwd=stale; fwd-status=304")
        #expect(revalidated.fields["x-version"] == "2" && revalidated.fields["content-length"] == "7")
        let asked = requests(upstream, "/item")
        #expect(asked.count == 2 && asked[1].contains("If-None-Match: \"v1\"\r\n") && !asked[0].contains("If-None-Match"))
        // The 304's max-age made it fresh again.
        let hit = try call(gateway, "/item", options)
        #expect(hit.fields["cache-status"]?.hasPrefix("gatewayd; hit") == true && requests(upstream, "/item").count == 2)
    }

    @Test(arguments: protocols) func aFailingUpstreamGetsTheStaleAnswer(_ options: [String]) async throws {
        let upstream = Self.sequence([
            // 100 s old with 10 s of freshness: stale, and within the route's stale_if_error.
            Self.answer(#"{"v":1}"#, "Cache-Control: max-age=10\r\nDate: \(Self.date(ago: 100))\r\n"),
            Self.answer("down", "", status: "503 Service Unavailable"),
        ])
        let gateway = try await Self.gateway(try await upstream.start())
        let first = try call(gateway, "/item", options)
        #expect(first.fields["cache-status"] == "gatewayd; fwd=miss; stored")
        let stale = try call(gateway, "/item", options)
        #expect(stale.status == "200" && stale.body == #"{"v":1}"#)
        #expect(stale.fields["cache-status"] == "gatewayd; fwd=stale; fwd-status=503")
        // The upstream gone altogether: the stale answer still.
        await upstream.stop()
        let gone = try call(gateway, "/item", options)
        #expect(gone.status == "200" && gone.body == #"{"v":1}"#)
        #expect(gone.fields["cache-status"] == "gatewayd; fwd=stale; fwd-status=502")
        // A path never stored gets the gateway's problem.
        #expect(try call(gateway, "/never", options).status == "502")
    }

    @Test(arguments: protocols) func aClientsOwnConditionIsAnsweredFromAFreshEntry(_ options: [String]) async throws {
        let upstream = RawUpstream { _ in Self.answer(#"{"v":1}"#, "ETag: W/\"v1\"\r\nCache-Control: max-age=60\r\n") }
        let gateway = try await Self.gateway(try await upstream.start())
        _ = try call(gateway, "/item", options)
        let conditional = try call(gateway, "/item", options, ["-H", "If-None-Match: \"v1\""])
        #expect(conditional.status == "304" && conditional.body.isEmpty && conditional.fields["etag"] == "W/\"v1\"")
        #expect(conditional.fields["cache-status"]?.hasPrefix("gatewayd; hit") == true)
        let other = try call(gateway, "/item", options, ["-H", "If-None-Match: \"v2\""])
        #expect(other.status == "200" && other.body == #"{"v":1}"#)
        #expect(requests(upstream, "/item").count == 1)
    }

    @Test(arguments: protocols) func anUnsafeMethodInvalidatesThePath(_ options: [String]) async throws {
        let upstream = RawUpstream { _ in Self.answer(#"{"v":1}"#, "Cache-Control: max-age=60\r\n") }
        let gateway = try await Self.gateway(try await upstream.start())
        _ = try call(gateway, "/item?x=1", options)
        _ = try call(gateway, "/item?x=1", options)
        #expect(requests(upstream, "/item?x=1").count == 1)
        _ = try call(gateway, "/item", options, ["-X", "POST", "--data-binary", "{}"])
        let after = try call(gateway, "/item?x=1", options)
        #expect(after.fields["cache-status"] == "gatewayd; fwd=miss; stored" && requests(upstream, "/item?x=1").count == 2)
    }

    /// `count` clients at once (curl's parallel transfers) ask `path`: each one's status and `Cache-Status`.
    func crowd(_ gateway: GatewayHarness, _ path: String, count: Int, _ options: [String]) throws -> [String] {
        let urls = Array(repeating: "\(gateway.base)\(path)", count: count)
        let result = try runPeer("/usr/bin/curl", ["-s", "--max-time", "10", "-Z", "--parallel-immediate", "--parallel-max", "\(count)"] + options
                                     + ["-w", "%{http_code} %header{cache-status}\\n"] + urls.flatMap { ["-o", "/dev/null", $0] })
        return result.text.split(separator: "\n").map(String.init)
    }

    /// A slow upstream (each answer 300 ms after its request) that counts what it is asked.
    static func slow(_ answer: RawUpstream.Answer) -> RawUpstream {
        var slow = answer
        slow.delay = .milliseconds(300)
        return RawUpstream { [slow] _ in slow }
    }

    @Test(arguments: protocols) func aCrowdOfMissesMakesOneUpstreamCall(_ options: [String]) async throws {
        let upstream = Self.slow(Self.answer(#"{"catalog":true}"#, "Cache-Control: max-age=60\r\n"))
        let gateway = try await Self.gateway(try await upstream.start())
        let answers = try crowd(gateway, "/catalog", count: 40, options)
        #expect(answers.count == 40 && answers.allSatisfy { $0.hasPrefix("200 ") }, "\(answers)")
        #expect(answers.filter { $0.hasSuffix("fwd=miss; stored") }.count == 1)
        #expect(answers.filter { $0.hasSuffix("fwd=miss; collapsed") || $0.contains("; hit;") }.count == 39, "\(answers)")
        #expect(requests(upstream, "/catalog").count == 1)
    }

    @Test(arguments: protocols) func waitersWhoseClientsLeaveCostNothing(_ options: [String]) async throws {
        let upstream = Self.slow(Self.answer(#"{"catalog":true}"#, "Cache-Control: max-age=60\r\n"))
        let gateway = try await Self.gateway(try await upstream.start())
        // The leader's call is under way (300 ms); nineteen clients wait for it and give up after 50 ms.
        async let leader = curlDetached(["-o", "/dev/null", "-w", "%{http_code}"] + options + ["\(gateway.base)/catalog"])
        #expect(await eventually(timeout: 10) { requests(upstream, "/catalog").count == 1 })
        let urls = Array(repeating: "\(gateway.base)/catalog", count: 19)
        _ = try runPeer("/usr/bin/curl", ["-s", "--max-time", "0.05", "-Z", "--parallel-immediate"] + options + urls.flatMap { ["-o", "/dev/null", $0] })
        #expect(try await leader.text == "200")
        // The fill ended stored: the next client gets a hit, and the upstream was asked once.
        #expect(try call(gateway, "/catalog", options).fields["cache-status"]?.hasPrefix("gatewayd; hit") == true)
        #expect(requests(upstream, "/catalog").count == 1)
    }

    @Test(arguments: protocols) func aFailedLeaderFailsItsWaitersAtOnce(_ options: [String]) async throws {
        // The upstream takes the request and closes without an answer.
        let upstream = Self.slow(.init("", close: true))
        let gateway = try await Self.gateway(try await upstream.start())
        let answers = try crowd(gateway, "/catalog", count: 20, options)
        #expect(answers.count == 20 && answers.allSatisfy { $0.hasPrefix("502") }, "\(answers)")
        #expect(requests(upstream, "/catalog").count == 1)
    }

    @Test(arguments: protocols) func staleWhileRevalidateServesAtOnceAndRefreshesOnce(_ options: [String]) async throws {
        let upstream = Self.sequence([
            Self.answer(#"{"v":1}"#, "Cache-Control: max-age=1, stale-while-revalidate=600\r\nDate: \(Self.date(ago: 30))\r\n"),
            Self.answer(#"{"v":2}"#, "Cache-Control: max-age=600\r\n"),
        ])
        let gateway = try await Self.gateway(try await upstream.start())
        _ = try call(gateway, "/item", options)
        let stale = try call(gateway, "/item", options)
        #expect(stale.body == #"{"v":1}"# && stale.fields["cache-status"]?.hasPrefix("gatewayd; hit; ttl=-") == true, "\(stale.fields)")
        // The refresh runs after the stale answer went out; then the refreshed answer is the stored one.
        #expect(await eventually(timeout: 10) { requests(upstream, "/item").count == 2 })
        #expect(await eventually(timeout: 10) { (try? call(gateway, "/item", options).body) == #"{"v":2}"# })
        #expect(requests(upstream, "/item").count == 2)
    }

    /// The SOAP example as operators run it: the translated JSON is what is
    /// stored, so a hit costs neither the SOAP call nor its translation, and
    /// with the service gone the stored user is served stale.
    @Test(arguments: protocols) func theSOAPExampleServesItsTranslatedUsersFromTheStore(_ options: [String]) async throws {
        let service = try SOAPService()
        defer { service.stop() }
        let config = try String(contentsOf: OTLPReceiver.root.appendingPathComponent("config/examples/soap-users.yaml"), encoding: .utf8)
            .replacingOccurrences(of: "127.0.0.1:8080", with: "127.0.0.1:0").replacingOccurrences(of: "127.0.0.1:8000", with: "127.0.0.1:\(service.port)")
            // Fresh for 3 s: the hit below comes well within them, whatever second the service's Date fell in (a 1 s ttl
            // could start out stale, the Date a second behind the gateway's clock).
            .replacingOccurrences(of: "cache: {ttl: 60s, stale_if_error: 10m}", with: "cache: {ttl: 3s, stale_if_error: 10m}")
        let gateway = try await GatewayHarness.start(config)
        let miss = try call(gateway, "/users/7", options)
        #expect(miss.body == #"{"id":7,"name":"Ann <admin>","tags":["ops"],"since":1714566600000}"#)
        #expect(miss.fields["cache-status"] == "gatewayd; fwd=miss; stored" && miss.fields["content-type"] == "application/json")
        let hit = try call(gateway, "/users/7", options)
        #expect(hit.body == miss.body && hit.fields["cache-status"]?.hasPrefix("gatewayd; hit") == true)
        #expect(await service.requests(count: 1).count == 1)
        // The service gone, the stored user outlives its seconds of freshness.
        service.stop()
        #expect(await eventually(timeout: 10) { (try? call(gateway, "/users/7", options).fields["cache-status"])?.hasPrefix("gatewayd; fwd=stale") == true })
        let stale = try call(gateway, "/users/7", options)
        #expect(stale.status == "200" && stale.body == miss.body)
        // A user never stored gets the gateway's problem.
        #expect(try call(gateway, "/users/9", options).status == "502")
    }

    /// The cache sits after rate limiting: a hit still counts against the client's limit.
    @Test(arguments: protocols) func aHitCountsAgainstTheRateLimit(_ options: [String]) async throws {
        let upstream = RawUpstream { _ in Self.answer("{}", "Cache-Control: max-age=60\r\n") }
        let port = try await upstream.start()
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            upstreams: {legacy: {url: "http://127.0.0.1:\(port)"}}
            routes:
              - {name: r, match: {prefix: /}, upstream: legacy, cache: {}, rate_limit: {requests: 2, per: 1h, burst: 0}}
            """)
        let statuses = try (0..<3).map { _ in try call(gateway, "/item", options).status }
        #expect(statuses == ["200", "200", "429"] && requests(upstream, "/item").count == 1)
    }
}

