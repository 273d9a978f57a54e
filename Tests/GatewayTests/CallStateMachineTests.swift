import NIOCore
import Rewriter
import Testing
@testable import Gateway

/// The call's lifecycle without sockets: every late timer and completion
/// carries the token of what started it, and is ignored once that has ended.
@Suite(.ownThreads) struct CallStateMachineTests {
    /// Any clock's instants do: these tests pass time by hand.
    typealias Machine = CallStateMachine<ContinuousClock.Instant>
    typealias Token = Machine.Token
    let t0 = ContinuousClock.now

    /// Starts a call with no modifiers and returns its first try's token.
    func started(_ machine: inout Machine, perTry: Duration? = .seconds(1)) -> Token {
        guard case .acquireConnection(let token) = machine.start(deadline: t0 + .seconds(60), runsModifiers: false, perTryTimeout: perTry) else {
            Issue.record("a call without modifiers acquires a connection first")
            return Token(call: 0, attempt: 0)
        }
        return token
    }

    /// Starts a call whose route retries a 503 once (immediately) and returns its first try's token.
    func startedWithPolicy(_ machine: inout Machine, perTry: Duration? = .seconds(1),
                           retry policy: String = "{attempts: 2, on: [503, connect-failure, reset], backoff: {strategy: immediate}}") throws -> Token {
        let config = try ConfigLoader.load(yaml: """
            listeners: [{address: 127.0.0.1:0}]
            routes: [{name: r, upstream: echo, retry: \(policy)}]
            """).config
        let retry = RetryState<ContinuousClock.Instant>(policy: config.routes[0].retry, validators: [], method: "GET", replayable: true, deadline: nil)
        guard case .acquireConnection(let token) = machine.start(deadline: t0 + .seconds(60), runsModifiers: false, perTryTimeout: perTry,
                                                                 retry: retry) else {
            Issue.record("a call without modifiers acquires a connection first")
            return Token(call: 0, attempt: 0)
        }
        return token
    }


    /// A route's validators and retry policy, as operators write them.
    func retryState(_ route: String) throws -> RetryState<ContinuousClock.Instant> {
        let config = try ConfigLoader.load(yaml: """
            listeners: [{address: 127.0.0.1:0}]
            upstreams: {auth: {url: "http://127.0.0.1:9"}}
            routes: [\(route)]
            """).config
        return RetryState(policy: config.routes[0].retry, validators: config.routes[0].validate, method: "GET", replayable: true, deadline: nil)
    }

    func started(_ machine: inout Machine, retry: RetryState<ContinuousClock.Instant>, streams: Bool = false) -> Token {
        guard case .acquireConnection(let token) = machine.start(deadline: t0 + .seconds(10), runsModifiers: false, perTryTimeout: nil,
                                                                 retry: retry, streams: streams) else {
            Issue.record("a call without modifiers acquires a connection first")
            return Token(call: 0, attempt: 0)
        }
        return token
    }

    static let head = ResponseHead(version: .http1_1, status: .ok, headers: [:])
    static func answer(_ status: Int, _ headers: HeaderList = [:]) -> ResponseHead {
        ResponseHead(version: .http1_1, status: .init(statusCode: status), headers: headers)
    }

    @Test func aPerTryTimerOfTheCallBeforeDoesNothingToTheNext() {
        var machine = Machine()
        let a = started(&machine)
        #expect(machine.connectionReady(a) == .send(a, tries: 1, perTryTimeout: .seconds(1), streamed: nil))
        _ = machine.responseHeadForwarded()
        _ = machine.end()
        // Call B on the same connection, same try number as A's.
        let b = started(&machine)
        #expect(b.attempt == a.attempt && b != a)
        #expect(machine.connectionReady(b) == .send(b, tries: 1, perTryTimeout: .seconds(1), streamed: nil))
        #expect(machine.perTryTimerFired(a) == .none)
        #expect(machine.perTryTimerFired(b) == .timeOutTry)
    }

    @Test func aTimerAfterItsCallEndedIsIgnored() {
        var machine = Machine()
        let a = started(&machine)
        _ = machine.connectionReady(a)
        #expect(machine.end() == .none)
        #expect(machine.perTryTimerFired(a) == .none)
        #expect(!machine.isCurrent(a))
    }

    @Test func aTryTimesOutWhileItsHeadIsReadButNotOnceForwarded() throws {
        var random = SystemRandomNumberGenerator()
        var machine = Machine()
        let a = try startedWithPolicy(&machine)
        _ = machine.connectionReady(a)
        // Held for a body validator.
        #expect(machine.responseHead(Self.head, holdsBody: true, now: t0, random: &random) == .none)
        #expect(machine.perTryTimerFired(a) == .timeOutTry)
        _ = machine.responseHeadForwarded()
        #expect(machine.perTryTimerFired(a) == .none)
        #expect(machine.upstreamReadComplete() == .flush)
    }

    @Test func aCompletionAfterTheClientWentAwayIsNotUsed() {
        var machine = Machine()
        guard case .runModifiers(let a) = machine.start(deadline: t0 + .seconds(60), runsModifiers: true, perTryTimeout: nil) else {
            Issue.record("modifiers run first")
            return
        }
        // The client reset the stream while the hooks ran.
        _ = machine.end(clientGone: true)
        #expect(machine.modifiersFinished(a) == .none)
        #expect(machine.connectionReady(a) == .giveBack)
        #expect(!machine.isCurrent(a))
    }

    @Test func aConnectionForAnEarlierTryGoesBack() throws {
        var random = SystemRandomNumberGenerator()
        var machine = Machine()
        let first = started(&machine, retry: try retryState("{name: r, upstream: echo, retry: {attempts: 2, on: [reset], backoff: {strategy: fixed, base: 300ms}}}"))
        _ = machine.connectionReady(first)
        guard case .askBudget = machine.tryFailed(.reset("closed"), progress: .sent, now: t0, random: &random),
            case .retry(let second, let delay, _) = machine.budgetAnswered(true)
        else {
            Issue.record("a retry with a delay waits")
            return
        }
        #expect(delay == .milliseconds(300) && second.attempt == 2)
        // The first try's timer and a connection for it are both stale now.
        #expect(machine.perTryTimerFired(first) == .none)
        #expect(machine.backoffElapsed(first) == .none)
        #expect(machine.backoffElapsed(second) == .acquireConnection(second))
        #expect(machine.connectionReady(first) == .giveBack)
        #expect(machine.connectionReady(second) == .send(second, tries: 2, perTryTimeout: nil, streamed: nil))
    }

    @Test func aBackoffOfAnEndedCallStartsNothing() throws {
        var random = SystemRandomNumberGenerator()
        var machine = Machine()
        let a = started(&machine, retry: try retryState("{name: r, upstream: echo, retry: {attempts: 2, on: [reset], backoff: {strategy: fixed, base: 1s}}}"))
        _ = machine.connectionReady(a)
        _ = machine.tryFailed(.reset("closed"), progress: .sent, now: t0, random: &random)
        guard case .retry(let retry, _, _) = machine.budgetAnswered(true) else { Issue.record("waits"); return }
        _ = machine.end()
        let b = started(&machine)
        #expect(machine.backoffElapsed(retry) == .none)
        #expect(machine.isCurrent(b) && machine.connectionReady(b) == .send(b, tries: 1, perTryTimeout: .seconds(1), streamed: nil))
    }

    static let refreshing = """
        {name: r, upstream: echo, retry: {attempts: 2},
         validate: [{status: 401, then: {refresh: {request: {upstream: auth, method: POST, path: /token},
                                                   capture: {pointer: /access_token, header: Authorization}}}}]}
        """

    @Test func aRefreshCompletesOnlyForItsTry() throws {
        var random = SystemRandomNumberGenerator()
        var machine = Machine()
        let a = started(&machine, retry: try retryState(Self.refreshing))
        _ = machine.connectionReady(a)
        #expect(machine.responseHead(Self.answer(401), holdsBody: false, now: t0, random: &random) == .askBudget)
        guard case .startRefresh(_, let refresh, let end) = machine.budgetAnswered(true) else { Issue.record("refreshes"); return }
        // A refresh says nothing about the endpoint, and is logged.
        #expect(end.tellsEndpoint && end.failure == nil && end.result == .status(401))
        #expect(refresh.attempt == 2)
        #expect(machine.credentialReady(a) == .none)
        #expect(machine.credentialReady(refresh) == .acquireConnection(refresh))
        _ = machine.end()
        #expect(machine.credentialReady(refresh) == .none)
        #expect(machine.credentialFailed(refresh, Problem(status: 502, code: "test", title: "x", detail: "")) == .none)
    }

    @Test func aRefreshThatCannotStartLetsTheRefusedAnswerThrough() throws {
        var random = SystemRandomNumberGenerator()
        var machine = Machine()
        let a = started(&machine, retry: try retryState(Self.refreshing))
        _ = machine.connectionReady(a)
        _ = machine.responseHead(Self.answer(401), holdsBody: false, now: t0, random: &random)
        guard case .startRefresh(_, let refresh, _) = machine.budgetAnswered(true) else { Issue.record("refreshes"); return }
        // The head the runner holds goes to the client, once; the outcome was told already.
        #expect(machine.refreshUnavailable(refresh) == .forwardHead(nil))
        #expect(machine.refreshUnavailable(refresh) == .none)
        // A held answer is written whole instead.
        var held = Machine()
        let b = started(&held, retry: try retryState(Self.refreshing))
        _ = held.connectionReady(b)
        _ = held.responseHead(Self.answer(401), holdsBody: true, now: t0, random: &random)
        _ = held.upstreamBody(ByteBuffer(string: "no"), limit: 10)
        #expect(held.responseEnded(now: t0, random: &random) == .askBudget)
        guard case .startRefresh(_, let next, _) = held.budgetAnswered(true) else { Issue.record("refreshes"); return }
        #expect(held.refreshUnavailable(next) == .writeHeld(head: Self.answer(401), body: Array("no".utf8), nil))
        // A failed credential fails the call with the runner's problem.
        var failing = Machine()
        let c = started(&failing, retry: try retryState(Self.refreshing))
        _ = failing.connectionReady(c)
        _ = failing.responseHead(Self.answer(401), holdsBody: false, now: t0, random: &random)
        guard case .startRefresh(_, let third, _) = failing.budgetAnswered(true) else { Issue.record("refreshes"); return }
        let problem = Problem(status: 502, code: "test", title: "refresh failed", detail: "")
        #expect(failing.credentialFailed(third, problem) == .respond(problem, nil))
    }

    @Test func anUnsentRequestIsReplayedOnceAndAStreamedOneNever() throws {
        var random = SystemRandomNumberGenerator()
        var machine = Machine()
        let a = started(&machine)
        _ = machine.connectionReady(a)
        guard case .retry(let replay, .zero, let end?) = machine.tryFailed(.reset("closed"), progress: .unsent, now: t0, random: &random) else {
            Issue.record("replayed once")
            return
        }
        // Logged as a retry the route did not ask for, and told to the endpoint.
        #expect(end.decided == .retry(after: .zero, reason: "unsent") && end.tellsEndpoint && end.failure == .reset)
        _ = machine.connectionReady(replay)
        guard case .failTry(let error, _) = machine.tryFailed(.reset("closed"), progress: .unsent, now: t0, random: &random), error.kind == .reset else {
            Issue.record("a second unsent failure is the gateway's 502")
            return
        }
        _ = machine.end()
        guard case .acquireConnection(let streamed) = machine.start(deadline: t0 + .seconds(60), runsModifiers: false, perTryTimeout: nil,
                                                                    streams: true) else {
            Issue.record("starts")
            return
        }
        _ = machine.connectionReady(streamed)
        guard case .failTry = machine.tryFailed(.reset("closed"), progress: .unsent, now: t0, random: &random) else {
            Issue.record("a streamed body is never sent twice")
            return
        }
    }

    @Test func aDrainedRefusalRetriesAfterItsDelay() throws {
        var random = SystemRandomNumberGenerator()
        var machine = Machine()
        let a = started(&machine, retry: try retryState("{name: r, upstream: echo, retry: {attempts: 3, on: [503], backoff: {strategy: fixed, base: 50ms}}}"))
        _ = machine.connectionReady(a)
        #expect(machine.responseHead(Self.answer(503, ["Content-Length": "12"]), holdsBody: false, now: t0, random: &random) == .askBudget)
        guard case .drain(let end) = machine.budgetAnswered(true) else { Issue.record("drains"); return }
        #expect(end.tellsEndpoint && end.failure == .status5xx && end.decided == .retry(after: .milliseconds(50), reason: "status-503"))
        // The refused body is not the client's, and the try can no longer time out.
        #expect(machine.upstreamBody(ByteBuffer(string: "unavailable!"), limit: 100) == .none)
        #expect(machine.perTryTimerFired(a) == .none)
        guard case .backOff(let next, .milliseconds(50)) = machine.responseEnded(now: t0, random: &random) else {
            Issue.record("waits after the drain")
            return
        }
        #expect(next.attempt == 2)
        // A drained refusal whose connection fails: its retry starts, its connection dropped.
        var failing = Machine()
        let b = started(&failing, retry: try retryState("{name: r, upstream: echo, retry: {attempts: 3, on: [503], backoff: {strategy: immediate}}}"))
        _ = failing.connectionReady(b)
        _ = failing.responseHead(Self.answer(503, ["Content-Length": "12"]), holdsBody: false, now: t0, random: &random)
        guard case .drain = failing.budgetAnswered(true) else { Issue.record("drains"); return }
        guard case .retry(let retry, .zero, let told?) = failing.tryFailed(.reset("closed"), progress: .responseStarted, now: t0, random: &random)
        else { Issue.record("the retry starts"); return }
        #expect(retry.attempt == 2 && !told.tellsEndpoint)
    }

    @Test func theCallsDeadlineIsItsOwn() {
        var machine = Machine()
        let a = started(&machine)
        _ = machine.connectionReady(a)
        #expect(machine.deadlinePassed(now: t0 + .seconds(59)) == .wake(at: t0 + .seconds(60)))
        #expect(machine.deadlinePassed(now: t0 + .seconds(60)) == .timeOutCall(forwarded: false))
        _ = machine.responseHeadForwarded()
        #expect(machine.deadlinePassed(now: t0 + .seconds(61)) == .timeOutCall(forwarded: true))
        _ = machine.end()
        // A wake-up after the call ended, and one for the next call's earlier start.
        #expect(machine.deadlinePassed(now: t0 + .seconds(61)) == .none)
        _ = machine.start(deadline: t0 + .seconds(62), runsModifiers: false, perTryTimeout: nil)
        #expect(machine.deadlinePassed(now: t0 + .seconds(61.5)) == .wake(at: t0 + .seconds(62)))
    }

    @Test func aHeadIsHeldJudgedOrForwardedAsTheRouteJudgesTries() throws {
        var random = SystemRandomNumberGenerator()
        var plain = Machine()
        let plainTry = started(&plain)
        _ = plain.connectionReady(plainTry)
        // Told to its endpoint as a 5xx or not; nothing decided, nothing logged.
        #expect(plain.responseHead(Self.answer(502), holdsBody: false, now: t0, random: &random)
                == .forwardHead(.init(tries: 1, tellsEndpoint: true, failure: .status5xx)))
        var judged = Machine()
        let judgedTry = try startedWithPolicy(&judged)
        _ = judged.connectionReady(judgedTry)
        guard case .forwardHead(let end?) = judged.responseHead(Self.head, holdsBody: false, now: t0, random: &random) else {
            Issue.record("accepted")
            return
        }
        #expect(end.decided == .accept && end.result == .status(200) && end.failure == nil)
        var held = Machine()
        let heldTry = try startedWithPolicy(&held)
        _ = held.connectionReady(heldTry)
        #expect(held.responseHead(Self.head, holdsBody: true, now: t0, random: &random) == .none)
        #expect(held.upstreamBody(ByteBuffer(string: "ok"), limit: 10) == .none)
        // Its end gives the whole answer back, judged.
        guard case .writeHeld(Self.head, Array("ok".utf8), let heldEnd?) = held.responseEnded(now: t0, random: &random) else {
            Issue.record("written whole")
            return
        }
        #expect(heldEnd.decided == .accept)
        _ = plain.responseHeadForwarded()
        #expect(plain.upstreamBody(ByteBuffer(string: "x"), limit: 0) == .forwardBody(ByteBuffer(string: "x")))
        #expect(plain.responseEnded(now: t0, random: &random) == .finish)
    }

    @Test func aFailedTryIsReplayedJudgedCutShortOrFailedByWhereItStopped() throws {
        var random = SystemRandomNumberGenerator()
        let reset = UpstreamError.reset("closed"), refused = UpstreamError.connectFailure("refused")
        // Unsent: replayed once, unasked; then the retry policy judges, and the budget is asked.
        var machine = Machine()
        let a = try startedWithPolicy(&machine)
        _ = machine.connectionReady(a)
        guard case .retry(let replay, .zero, _) = machine.tryFailed(reset, progress: .unsent, now: t0, random: &random) else {
            Issue.record("an unsent request is replayed")
            return
        }
        _ = machine.connectionReady(replay)
        // The replay was free: the policy's second try is the next.
        #expect(machine.tryFailed(reset, progress: .unsent, now: t0, random: &random) == .askBudget)
        guard case .retry(let second, .zero, _) = machine.budgetAnswered(true), second.attempt == 3 else {
            Issue.record("the policy retries a reset")
            return
        }
        _ = machine.connectionReady(second)
        // Its attempts are spent: the gateway's 502.
        guard case .failTry(reset, let spent?) = machine.tryFailed(reset, progress: .sent, now: t0, random: &random) else {
            Issue.record("a 502")
            return
        }
        #expect(spent.decided == .giveUp(reason: "reset: attempts spent") && spent.tries == 3)
        // A connect failure is a try, never replayed unasked: the policy judges it.
        var connect = Machine()
        let c = try startedWithPolicy(&connect)
        #expect(connect.connectFailed(c, refused, now: t0, random: &random) == .askBudget)
        guard case .retry(let afterConnect, .zero, let told?) = connect.budgetAnswered(true) else {
            Issue.record("the policy retries a connect failure")
            return
        }
        // Its endpoint hears of it from the pool, not as a try's outcome.
        #expect(!told.tellsEndpoint && told.tries == 1)
        #expect(connect.connectFailed(c, refused, now: t0, random: &random) == .none)
        #expect(connect.connectionReady(afterConnect) == .send(afterConnect, tries: 2, perTryTimeout: .seconds(1), streamed: nil))
        // Without a policy: a 502, or cut short once the response went to the client.
        var plain = Machine()
        let plainTry = started(&plain)
        _ = plain.connectionReady(plainTry)
        _ = plain.tryFailed(reset, progress: .unsent, now: t0, random: &random)
        var cut = Machine()
        let cutTry = started(&cut)
        _ = cut.connectionReady(cutTry)
        _ = cut.responseHeadForwarded()
        guard case .cutShort(reset, let end?) = cut.tryFailed(reset, progress: .responseStarted, now: t0, random: &random) else {
            Issue.record("cut short")
            return
        }
        #expect(!end.tellsEndpoint)
    }

    @Test func aHeldAnswerGrowsUntilJudgedOrTooLarge() throws {
        var random = SystemRandomNumberGenerator()
        var machine = Machine()
        let a = try startedWithPolicy(&machine)
        _ = machine.connectionReady(a)
        #expect(machine.responseHead(Self.head, holdsBody: true, now: t0, random: &random) == .none)
        #expect(machine.upstreamBody(ByteBuffer(string: "abc"), limit: 5) == .none)
        // Past the limit it is let through as it is, and the try can no longer be timed out.
        #expect(machine.upstreamBody(ByteBuffer(string: "def"), limit: 5)
                == .letThrough(head: Self.head, body: Array("abcdef".utf8), .init(tries: 1, tellsEndpoint: true)))
        _ = machine.responseHeadForwarded()
        #expect(machine.perTryTimerFired(a) == .none)
        #expect(machine.upstreamBody(ByteBuffer(string: "g"), limit: 5) == .forwardBody(ByteBuffer(string: "g")))
    }

    @Test func aStreamedBodyWaitsForItsConnectionAndOutlivesItsCall() {
        var machine = Machine()
        guard case .acquireConnection(let a) = machine.start(deadline: t0 + .seconds(60), runsModifiers: false, perTryTimeout: nil,
                                                             streams: true) else { Issue.record("starts"); return }
        let first = ByteBuffer(string: "one"), second = ByteBuffer(string: "two")
        #expect(machine.requestBody(first) == .none)
        // The parts read before the connection go with the head, in order.
        #expect(machine.connectionReady(a) == .send(a, tries: 1, perTryTimeout: nil, streamed: .init(pending: [first], end: false)))
        #expect(machine.requestBody(second) == .sendBody(second))
        #expect(machine.upstreamWritable() == .resumeClient)
        // The call ends first (answered early): the rest is read and dropped.
        #expect(machine.end() == .resumeClient)
        #expect(machine.requestBody(first) == .none)
        #expect(machine.requestEnded() == .resumeClient)
        // The next call's body is read whole.
        #expect(machine.requestBody(first) == .bufferBody(first))
    }

    @Test func aBodyThatEndedBeforeItsConnectionIsSentWhole() {
        var machine = Machine()
        guard case .acquireConnection(let a) = machine.start(deadline: t0 + .seconds(60), runsModifiers: false, perTryTimeout: nil,
                                                             streams: true) else { Issue.record("starts"); return }
        let part = ByteBuffer(string: "all")
        _ = machine.requestBody(part)
        #expect(machine.requestEnded() == .none)
        #expect(machine.connectionReady(a) == .send(a, tries: 1, perTryTimeout: nil, streamed: .init(pending: [part], end: true)))
        #expect(machine.upstreamWritable() == .none)
        // A client gone drops what was still to come.
        guard case .acquireConnection = machine.start(deadline: t0 + .seconds(60), runsModifiers: false, perTryTimeout: nil, streams: true)
        else { Issue.record("starts"); return }
        #expect(machine.end(clientGone: true) == .none)
        #expect(machine.requestBody(part) == .bufferBody(part))
    }

    @Test func theBudgetIsAskedOnlyForARetryAndMaySayNo() throws {
        var random = SystemRandomNumberGenerator()
        let policy = "{name: r, upstream: echo, retry: {attempts: 3, on: [503], backoff: {strategy: immediate}}}"
        var machine = Machine()
        let a = started(&machine, retry: try retryState(policy))
        _ = machine.connectionReady(a)
        // An accepted answer asks nothing.
        guard case .forwardHead = machine.responseHead(Self.head, holdsBody: false, now: t0, random: &random) else { Issue.record("accepted"); return }
        // The budget says no: the refused answer goes to the client as it is.
        var spent = Machine()
        let b = started(&spent, retry: try retryState(policy))
        _ = spent.connectionReady(b)
        #expect(spent.responseHead(Self.answer(503), holdsBody: false, now: t0, random: &random) == .askBudget)
        guard case .forwardHead(let end?) = spent.budgetAnswered(false) else { Issue.record("let through"); return }
        #expect(end.decided == .giveUp(reason: "retry budget spent") && end.failure == .status5xx)
        // A late answer asks nothing.
        #expect(spent.budgetAnswered(true) == .none)
        // Too large to drain: dropped with its connection, and the next try starts.
        var large = Machine()
        let c = started(&large, retry: try retryState(policy))
        _ = large.connectionReady(c)
        _ = large.responseHead(Self.answer(503, ["Content-Length": "\(Machine.drainLimit + 1)"]), holdsBody: false, now: t0, random: &random)
        guard case .retry(let next, .zero, _) = large.budgetAnswered(true) else { Issue.record("retries"); return }
        #expect(next.attempt == 2)
    }

    @Test func oneTriesCountDrivesTheRetryPolicyAndUnsentReplaysAreFree() throws {
        var random = SystemRandomNumberGenerator()
        var machine = Machine()
        let a = started(&machine, retry: try retryState("{name: r, upstream: echo, retry: {attempts: 2, on: [503], backoff: {strategy: immediate}}}"))
        _ = machine.connectionReady(a)
        guard case .retry(let replay, _, _) = machine.tryFailed(.reset("closed"), progress: .unsent, now: t0, random: &random) else {
            Issue.record("replays")
            return
        }
        #expect(machine.connectionReady(replay) == .send(replay, tries: 2, perTryTimeout: nil, streamed: nil))
        #expect(machine.responseHead(Self.answer(503), holdsBody: false, now: t0, random: &random) == .askBudget)
        guard case .retry(let b, _, let first?) = machine.budgetAnswered(true) else { Issue.record("retries"); return }
        #expect(first.decided == .retry(after: .zero, reason: "status-503") && first.tries == 2)
        _ = machine.connectionReady(b)
        guard case .forwardHead(let last?) = machine.responseHead(Self.answer(503), holdsBody: false, now: t0, random: &random) else {
            Issue.record("given up")
            return
        }
        #expect(last.decided == .giveUp(reason: "status-503: attempts spent") && last.tries == 3)
    }

    @Test func aMalformedRequestIsRejectedOrItsAnswerCut() {
        var machine = Machine()
        let problem = Problem(status: 400, code: "test", title: "bad framing", detail: "")
        #expect(machine.malformedRequest(problem) == .rejectRequest(problem))
        let a = started(&machine)
        _ = machine.connectionReady(a)
        _ = machine.responseHeadForwarded()
        #expect(machine.malformedRequest(problem) == .closeClient)
    }
}
