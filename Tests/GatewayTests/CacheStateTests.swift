import NIOConcurrencyHelpers
import NIOCore
import Rewriter
import Testing
@testable import Gateway

/// The cache's pure parts without sockets: directives, storability and
/// freshness, the byte-bounded LRU, fills and their waiters, and the call
/// machine's steps around them.
@Suite(.ownThreads) struct CacheStateTests {
    typealias Machine = CallStateMachine<ContinuousClock.Instant>
    let t0 = ContinuousClock.now
    let now: Int64 = 1_800_000_000

    func fail(_ comment: Comment = "an unexpected case") { Issue.record(comment) }

    func stored(_ headers: HeaderList, status: Int = 200, route: RouteCacheConfig = RouteCacheConfig(), request: HeaderList = [:],
                authorized: Bool = false, requestedAt: Int64? = nil) -> StoredAnswer.Storability {
        StoredAnswer.make(status: status, headers: headers, body: Array("body".utf8), request: request, authorized: authorized, route: route,
                          requestedAt: requestedAt ?? now, now: now)
    }

    func answer(_ headers: HeaderList, status: Int = 200, route: RouteCacheConfig = RouteCacheConfig()) -> StoredAnswer? {
        guard case .store(let answer) = stored(headers, status: status, route: route) else { return nil }
        return answer
    }

    func refusal(_ headers: HeaderList, status: Int = 200, authorized: Bool = false) -> String? {
        guard case .refuse(let why) = stored(headers, status: status, authorized: authorized) else { return nil }
        return why
    }

    @Test func directivesAreReadFromEveryLineAndBadNumbersMeanStale() {
        let control = CacheControl(["Cache-Control": "public, max-age=60", "cache-control": "S-MAXAGE=\"30\", stale-if-error=x, must-revalidate"])
        #expect(control.isPublic && control.maxAge == 60 && control.sMaxAge == 30 && control.mustRevalidate && control.staleIfError == nil)
        #expect(CacheControl(["Cache-Control": "max-age=-1"]).maxAge == 0)
        #expect(CacheControl(["Cache-Control": "max-age=99999999999999999999"]).maxAge == 2_147_483_648)
        // A CDN-Cache-Control that is not a valid dictionary is ignored.
        #expect(CacheControl(answer: ["CDN-Cache-Control": "max-age=5", "Cache-Control": "no-store"]).maxAge == 5)
        #expect(CacheControl(answer: ["CDN-Cache-Control": "max-age=\"5\"", "Cache-Control": "no-store"]).noStore)
        // Years past four digits are no dates (FuzzCache found one that overflowed, as an upstream's Retry-After could).
        #expect(HTTPDate.parse("Sunday, 06-Nov-1111111111111111147 08:49:37 GMT") == nil)
        #expect(HTTPDate.parse("Sun, 06 Nov 99999999999999 08:49:37 GMT") == nil && HTTPDate.parse("Sun Nov  6 08:49:37 99999999999999") == nil)
        #expect(HTTPDate.parse("Fri, 31 Dec 9999 23:59:59 GMT") != nil)
    }

    @Test func whatMayNotBeStoredSaysWhy() {
        #expect(refusal(["Cache-Control": "no-store, max-age=60"]) == "no-store")
        #expect(refusal(["Cache-Control": "private, max-age=60"]) == "private")
        #expect(refusal(["Cache-Control": "max-age=60", "Set-Cookie": "a=1"]) == "set-cookie")
        #expect(refusal(["Cache-Control": "max-age=60", "Vary": "Accept, *"]) == "vary-star")
        #expect(refusal(["Cache-Control": "max-age=60"], authorized: true) == "authorization")
        #expect(refusal(["Cache-Control": "max-age=60"], status: 206) == "status")
        #expect(refusal([:]) == "no-freshness")
        // Authorization is fine when the upstream says the answer is shared.
        #expect(refusal(["Cache-Control": "public, max-age=60"], authorized: true) == nil)
        #expect(refusal(["Cache-Control": "s-maxage=60"], authorized: true) == nil)
    }

    @Test func freshnessFollowsRFC9111() throws {
        // s-maxage over max-age over Expires over the route's ttl.
        var route = RouteCacheConfig()
        route.ttl = .seconds(60)
        #expect(try #require(answer(["Cache-Control": "max-age=10, s-maxage=20"], route: route)).lifetime == 20)
        #expect(try #require(answer(["Cache-Control": "max-age=10"], route: route)).lifetime == 10)
        let date = HTTPDate.format(now)
        #expect(try #require(answer(["Date": date, "Expires": HTTPDate.format(now + 30)], route: route)).lifetime == 30)
        #expect(try #require(answer([:], route: route)).lifetime == 60)
        // The route's ttl is for the statuses it names; others need the upstream's word.
        #expect(answer([:], status: 404, route: route) == nil)
        // An invalid or repeated Expires is already expired.
        #expect(try #require(answer(["Expires": "0", "ETag": "\"a\""], route: route)).lifetime == 0)
        #expect(try #require(answer(["Expires": "Thu, 01 Dec 2050 16:00:00 GMT", "expires": "Thu, 01 Dec 2050 16:00:00 GMT", "ETag": "\"a\""]))
            .lifetime == 0)
        // Heuristic: a tenth of the time since Last-Modified.
        #expect(try #require(answer(["Date": date, "Last-Modified": HTTPDate.format(now - 1000)])).lifetime == 100)
        // Age: the upstream's Age, or the time since its Date, whichever is more, plus the trip.
        let aged = try #require(answer(["Cache-Control": "max-age=100", "Date": HTTPDate.format(now - 30), "Age": "10"]))
        #expect(aged.age(now: now) == 30 && aged.age(now: now + 5) == 35 && aged.ttl(now: now + 5) == 65)
        #expect(try #require(answer(["Cache-Control": "max-age=100", "Age": "50, 0"])).age(now: now) == 50)
        guard case .store(let slow) = stored(["Cache-Control": "max-age=100", "Age": "10"], requestedAt: now - 4) else { return fail() }
        #expect(slow.age(now: now) == 14)
    }

    @Test func staleUsesFollowTheDirectives() throws {
        var route = RouteCacheConfig()
        route.staleIfError = .seconds(600)
        let stale = try #require(answer(["Cache-Control": "max-age=10", "ETag": "\"a\""], route: route))
        #expect(stale.use(now: now, requestNoCache: false) == .fresh)
        #expect(stale.use(now: now, requestNoCache: true) == .stale(servesOnError: true))
        #expect(stale.use(now: now + 20, requestNoCache: false) == .stale(servesOnError: true))
        #expect(stale.use(now: now + 700, requestNoCache: false) == .stale(servesOnError: false))
        let revalidating = try #require(answer(["Cache-Control": "max-age=10, stale-while-revalidate=30"]))
        #expect(revalidating.use(now: now + 20, requestNoCache: false) == .staleWhileRevalidating)
        #expect(revalidating.use(now: now + 50, requestNoCache: false) == .stale(servesOnError: false))
        // must-revalidate, s-maxage and no-cache never serve stale.
        for directive in ["max-age=10, must-revalidate", "s-maxage=10", "no-cache, max-age=10"] {
            let strict = try #require(answer(["Cache-Control": directive, "ETag": "\"a\""], route: route), "\(directive)")
            #expect(!strict.servesOnError(now: now + 20), "\(directive)")
        }
        // A 304 refreshes the fields and the age.
        let refreshed = try #require(stale.refreshed(by: ["Cache-Control": "max-age=50", "X-New": "1", "Content-Length": "0"], route: route,
                                                     requestedAt: now + 100, now: now + 100))
        #expect(refreshed.body == stale.body && refreshed.headers["X-New"] == "1" && refreshed.ttl(now: now + 100) == 50)
    }

    @Test func varyAndConditions() throws {
        guard case .store(let answer) = stored(["Cache-Control": "max-age=60", "Vary": "Accept-Language", "ETag": "W/\"v1\""],
                                               request: ["Accept-Language": "en, fr"])
        else { return fail() }
        #expect(answer.matches(["Accept-Language": "en,fr"]) && !answer.matches(["Accept-Language": "de"]) && !answer.matches([:]))
        #expect(CallCache.notModified(answer, request: ["If-None-Match": "\"x\", \"v1\""]))
        #expect(!CallCache.notModified(answer, request: ["If-None-Match": "\"v2\""]))
        #expect(CallCache.conditions(for: answer).first?.0 == "If-None-Match")
    }

    @Test func theLRUEvictsTheLeastRecentlyUsedByBytes() {
        var lru = ByteLRU<String, Int>(limit: 100)
        lru.set("a", 1, bytes: 40)
        lru.set("b", 2, bytes: 40)
        _ = lru.use("a")
        #expect(lru.set("c", 3, bytes: 40) == 1)
        #expect(lru.peek("b") == nil && lru.keysByRecency == ["c", "a"] && lru.bytes == 80)
        // Too large for the whole cache: not kept, nothing evicted.
        #expect(lru.set("d", 4, bytes: 101) == 0 && lru.peek("d") == nil && lru.count == 2)
        lru.set("a", 5, bytes: 10)
        #expect(lru.bytes == 50 && lru.keysByRecency == ["a", "c"])
        #expect(lru.shrink(to: 20) == 1 && lru.keysByRecency == ["a"])
        #expect(lru.removeAll { _ in true } == 1 && lru.bytes == 0 && lru.keysByRecency.isEmpty)
    }

    @Test func aFillHasOneLeaderAndEveryWaiterHearsOnce() throws {
        var config = CacheConfig()
        config.maxBytes = 1 << 20
        let cache = ResponseCache(config)
        let key = ResponseCache.Key(route: "r", target: "/a", fields: [])
        let heard = NIOLockedValueBox<[String]>([])
        func lookup(_ name: String, coalesce: Bool = true) -> ResponseCache.Lookup {
            cache.lookup(key, request: [:], now: now, requestNoCache: false, fills: true, coalesce: coalesce) {
                { end in
                    heard.withLockedValue {
                        switch end {
                        case .answer: $0.append("\(name):answer")
                        case .failed: $0.append("\(name):failed")
                        case .released: $0.append("\(name):released")
                        }
                    }
                }
            }
        }
        guard case .fill(let fill) = lookup("leader") else { return fail("the first miss leads") }
        guard case .wait = lookup("one"), case .wait(let gone) = lookup("two") else { return fail("the others wait") }
        cache.cancel(wait: gone, key: key)
        let stored = try #require(answer(["Cache-Control": "max-age=60"]))
        cache.end(fill, storing: stored)
        // Ending it again changes nothing: its waiters were told.
        cache.end(fill, storing: stored)
        #expect(heard.withLockedValue { $0 } == ["one:answer"])
        guard case .fresh = lookup("later") else { return fail("stored") }
        // Nothing storable: the waiters go upstream themselves.
        #expect(cache.purge { $0 == key } == 1)
        guard case .fill(let next) = lookup("leader2"), case .wait = lookup("three") else { return fail() }
        cache.end(next, storing: nil)
        #expect(heard.withLockedValue { $0 }.last == "three:released")
        // An answer larger than max_entry_bytes is not kept.
        config.maxEntryBytes = 64
        cache.resize(config)
        guard case .fill(let large) = lookup("leader3") else { return fail() }
        var big = stored
        big.body = Array(repeating: 1, count: 100)
        cache.end(large, storing: big)
        guard case .fill = lookup("after") else { return fail("a large answer was stored") }
        #expect(cache.bytes == 0)
    }

    @Test func theMachineLooksUpWaitsAndIgnoresALateFill() {
        var machine = Machine()
        guard case .lookUp(let token) = machine.start(deadline: t0 + .seconds(5), runsModifiers: false, perTryTimeout: nil, caches: true) else {
            return fail("a cached route asks its cache first")
        }
        #expect(machine.lookedUp(token, waits: true) == .none)
        #expect(machine.fillReleased(token) == .acquireConnection(token))
        // A second call waits; its deadline passes; the fill's late end is ignored.
        _ = machine.end()
        guard case .lookUp(let second) = machine.start(deadline: t0 + .seconds(5), runsModifiers: false, perTryTimeout: nil, caches: true) else {
            return fail()
        }
        _ = machine.lookedUp(second, waits: true)
        #expect(machine.deadlinePassed(now: t0 + .seconds(6)) == .timeOutCall(forwarded: false))
        _ = machine.end()
        #expect(machine.fillReleased(second) == .none && machine.lookedUp(second, waits: false) == .none)
        // With modifiers, the cache is asked once they let the request through.
        guard case .runModifiers(let third) = machine.start(deadline: t0 + .seconds(5), runsModifiers: true, perTryTimeout: nil, caches: true) else {
            return fail()
        }
        #expect(machine.modifiersFinished(third) == .lookUp(third))
    }
}
