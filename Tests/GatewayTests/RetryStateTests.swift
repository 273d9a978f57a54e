import Rewriter
import Testing
@testable import Gateway

/// The retry state machine on its own: explicit instants, seeded randomness, no I/O.
@Suite(.ownThreads) struct RetryStateTests {
    let t0 = ContinuousClock.now
    var random = SplitMix64(seed: 7)

    func policy(_ yaml: String) throws -> (RetryPolicy?, [ValidatorSpec]) {
        let route = try ConfigLoader.load(yaml: "listeners: [{address: 127.0.0.1:0}]\nroutes:\n  - name: r\n    upstream: echo\n" + yaml)
            .config.routes[0]
        return (route.retry, route.validate)
    }

    func state(_ yaml: String, method: String = "GET", replayable: Bool = true, deadline: Duration? = nil) throws -> RetryState<ContinuousClock.Instant> {
        let (retry, validate) = try policy(yaml)
        return RetryState(policy: retry, validators: validate, method: method, replayable: replayable, deadline: deadline.map { t0 + $0 })
    }

    static func response(_ status: Int, _ headers: HeaderList = [:], body: String? = nil) -> TryOutcome {
        .response(status: status, headers: headers, body: body.map { Array($0.utf8) })
    }

    static let retry503 = """
            retry: {attempts: 3, on: [503], backoff: {strategy: exponential, base: 25ms, max: 1s, jitter: false}}
        """

    @Test mutating func retriesUntilAnAnswerPasses() throws {
        var s = try state(Self.retry503)
        #expect(s.tryFinished(Self.response(503), tries: 1, now: t0, random: &random) == .retry(after: .milliseconds(25), reason: "status-503"))
        #expect(s.tryFinished(Self.response(503), tries: 2, now: t0, random: &random) == .retry(after: .milliseconds(50), reason: "status-503"))
        #expect(s.tryFinished(Self.response(200), tries: 3, now: t0, random: &random) == .accept)
    }

    @Test mutating func attemptsRunOut() throws {
        var s = try state(Self.retry503)
        _ = s.tryFinished(Self.response(503), tries: 1, now: t0, random: &random)
        _ = s.tryFinished(Self.response(503), tries: 2, now: t0, random: &random)
        #expect(s.tryFinished(Self.response(503), tries: 3, now: t0, random: &random) == .giveUp(reason: "status-503: attempts spent"))
    }

    @Test mutating func onlyAllowedMethodsWithReplayableBodiesRetry() throws {
        var post = try state(Self.retry503, method: "POST")
        #expect(post.tryFinished(Self.response(503), tries: 1, now: t0, random: &random) == .giveUp(reason: "status-503: method not in retry.methods"))
        var postAllowed = try state("""
                retry: {attempts: 2, on: [503], methods: [POST], backoff: {strategy: immediate}}
            """, method: "POST")
        #expect(postAllowed.tryFinished(Self.response(503), tries: 1, now: t0, random: &random) == .retry(after: .zero, reason: "status-503"))
        var streamed = try state(Self.retry503, replayable: false)
        #expect(streamed.tryFinished(Self.response(503), tries: 1, now: t0, random: &random)
            == .giveUp(reason: "status-503: the request body streamed upstream unbuffered, no replay"))
    }

    @Test mutating func transportFailuresFollowTheConditions() throws {
        var s = try state("""
                retry: {attempts: 5, per_try_timeout: 100ms, backoff: {strategy: fixed, base: 10ms, jitter: false}}
            """)
        for (index, name) in ["connect-failure", "reset", "timeout", "refused-stream"].enumerated() {
            #expect(s.tryFinished(.failure(UpstreamError(kind: UpstreamError.Kind(rawValue: name)!, detail: "x")), tries: index + 1, now: t0, random: &random)
                == .retry(after: .milliseconds(10), reason: name))
        }
        var noPolicy = try state("")
        #expect(noPolicy.tryFinished(.failure(.reset("x")), tries: 1, now: t0, random: &random) == .giveUp(reason: "reset"))
        #expect(noPolicy.tryFinished(Self.response(503), tries: 2, now: t0, random: &random) == .accept)
    }

    @Test mutating func noRetryTheDeadlineCannotFinish() throws {
        let yaml = """
                retry: {attempts: 3, on: [503], per_try_timeout: 300ms, backoff: {strategy: fixed, base: 100ms, jitter: false}}
            """
        var s = try state(yaml, deadline: .seconds(1))
        #expect(s.tryFinished(Self.response(503), tries: 1, now: t0 + .milliseconds(500), random: &random) == .retry(after: .milliseconds(100), reason: "status-503"))
        #expect(s.tryFinished(Self.response(503), tries: 2, now: t0 + .milliseconds(650), random: &random)
            == .giveUp(reason: "status-503: the deadline leaves no room"))
    }

    @Test mutating func retryAfterIsHonoredWhenAsked() throws {
        var s = try state("""
                retry: {attempts: 2, on: [429], retry_after: honor, backoff: {strategy: fixed, base: 10ms}}
            """, deadline: .seconds(5))
        #expect(s.tryFinished(Self.response(429, ["Retry-After": "2"]), tries: 1, now: t0, random: &random) == .retry(after: .seconds(2), reason: "status-429"))
        var tooLate = try state("""
                retry: {attempts: 2, on: [429], retry_after: honor}
            """, deadline: .seconds(1))
        #expect(tooLate.tryFinished(Self.response(429, ["Retry-After": "2"]), tries: 1, now: t0, random: &random)
            == .giveUp(reason: "status-429: the deadline leaves no room"))
        // An HTTP date: the wait is the date minus the wall clock's now.
        var dated = try state("""
                retry: {attempts: 2, on: [503], retry_after: honor}
            """, deadline: .seconds(60))
        let now = HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT")!
        #expect(now == 784_111_777)
        #expect(dated.tryFinished(Self.response(503, ["Retry-After": "Sun, 06 Nov 1994 08:49:40 GMT"]), tries: 1, now: t0, unixTime: now, random: &random)
            == .retry(after: .seconds(3), reason: "status-503"))
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT") == now)
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994") == now)
        #expect(HTTPDate.parse("tomorrow") == nil)
        // Formatted back the way RFC 9110 writes it, across years, leap days and before 1970.
        #expect(HTTPDate.format(now) == "Sun, 06 Nov 1994 08:49:37 GMT")
        for text in ["Thu, 01 Jan 1970 00:00:00 GMT", "Thu, 29 Feb 2024 23:59:59 GMT", "Wed, 31 Dec 1969 12:00:00 GMT",
                     "Mon, 23 Nov 2026 10:24:06 GMT", "Sat, 01 Jan 2000 00:00:00 GMT"] {
            #expect(HTTPDate.parse(text).map(HTTPDate.format) == text)
        }
    }

    @Test mutating func validatorChainDecidesFirst() throws {
        let yaml = """
                retry: {attempts: 3, backoff: {strategy: immediate}}
                validate:
                  - status: 200-299
                    else: fail
                  - json: {pointer: /error, absent: true}
                    else: retry
                  - header: {name: Content-Type, matches: "application/json.*"}
                    else: pass
                  - empty: false
                    else: retry
            """
        var s = try state(yaml)
        #expect(s.tryFinished(Self.response(500), tries: 1, now: t0, random: &random) == .fail(validator: "routes[0].validate[0] (status 200-299)"))
        #expect(s.tryFinished(Self.response(200, ["Content-Type": "application/json"], body: #"{"error":"busy"}"#), tries: 2, now: t0, random: &random)
            == .retry(after: .zero, reason: "routes[0].validate[1] (json /error)"))
        #expect(s.tryFinished(Self.response(200, ["Content-Type": "text/plain"], body: "x"), tries: 3, now: t0, random: &random) == .accept)
        var empty = try state(yaml)
        #expect(empty.tryFinished(Self.response(200, ["Content-Type": "application/json; charset=utf-8"], body: ""), tries: 1, now: t0, random: &random)
            == .retry(after: .zero, reason: "routes[0].validate[3] (empty)"))
        #expect(empty.tryFinished(Self.response(200, ["Content-Type": "application/json"], body: #"{"ok":true}"#), tries: 2, now: t0, random: &random)
            == .accept)
    }

    @Test mutating func refreshThenRetryOnMatchingAnswer() throws {
        let yaml = """
                retry: {attempts: 2}
                validate:
                  - status: 401
                    then:
                      refresh:
                        request: {upstream: echo, method: POST, path: /token}
                        capture: {pointer: /access_token, header: Authorization, format: "Bearer {}"}
            """
        var s = try state(yaml)
        guard case .refreshThenRetry(let spec) = s.tryFinished(Self.response(401), tries: 1, now: t0, random: &random) else {
            Issue.record("expected a refresh")
            return
        }
        #expect(spec.path == "/token")
        #expect(s.tryFinished(Self.response(401), tries: 2, now: t0, random: &random) == .giveUp(reason: "routes[0].validate[0] (status 401): attempts spent"))
    }

    @Test mutating func backoffStrategies() {
        func delays(_ backoff: RetryPolicy.Backoff) -> [Duration] {
            (1...6).map { backoff.delay(forRetry: $0, random: &random) }
        }
        let ms = { (v: Int64) in Duration.milliseconds(v) }
        #expect(delays(.init(strategy: .immediate, base: ms(25), max: .seconds(1), jitter: false)) == Array(repeating: .zero, count: 6))
        #expect(delays(.init(strategy: .fixed, base: ms(25), max: .seconds(1), jitter: false)) == Array(repeating: ms(25), count: 6))
        #expect(delays(.init(strategy: .exponential, base: ms(25), max: ms(500), jitter: false)) == [25, 50, 100, 200, 400, 500].map(ms))
        #expect(delays(.init(strategy: .fibonacci, base: ms(25), max: ms(200), jitter: false)) == [25, 25, 50, 75, 125, 200].map(ms))
        let jittered = delays(.init(strategy: .exponential, base: ms(25), max: ms(500), jitter: true))
        for (delay, cap) in zip(jittered, [25, 50, 100, 200, 400, 500].map(ms)) { #expect(delay >= .zero && delay <= cap) }
        #expect(Set(jittered).count > 1)
        // The default jitter applies to exponential only: fixed and fibonacci wait exactly.
        #expect(delays(.init(strategy: .fixed, base: ms(300), max: .seconds(1))) == Array(repeating: ms(300), count: 6))
        #expect(delays(.init(strategy: .fibonacci, base: ms(25), max: ms(200))) == [25, 25, 50, 75, 125, 200].map(ms))
        #expect(RetryPolicy.Backoff(strategy: .exponential, base: .seconds(1), max: .seconds(30), jitter: false)
            .delay(forRetry: 200, random: &random) == .seconds(30))
    }
}
