import NIOCore
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
        guard case .acquireConnection(let token) = machine.start(now: t0, timeout: .seconds(60), runsModifiers: false, perTryTimeout: perTry) else {
            Issue.record("a call without modifiers acquires a connection first")
            return Token(call: 0, attempt: 0)
        }
        return token
    }

    /// Starts a call whose route retries a 503 once (immediately) and returns its first try's token.
    func startedWithPolicy(_ machine: inout Machine, perTry: Duration? = .seconds(1)) throws -> Token {
        let config = try ConfigLoader.load(yaml: """
            listeners: [{address: 127.0.0.1:0}]
            routes: [{name: r, upstream: echo, retry: {attempts: 2, on: [503, connect-failure, reset], backoff: {strategy: immediate}}}]
            """).config
        let retry = RetryState<ContinuousClock.Instant>(policy: config.routes[0].retry, validators: [], method: "GET", replayable: true, deadline: nil)
        guard case .acquireConnection(let token) = machine.start(now: t0, timeout: .seconds(60), runsModifiers: false, perTryTimeout: perTry,
                                                                 retry: retry) else {
            Issue.record("a call without modifiers acquires a connection first")
            return Token(call: 0, attempt: 0)
        }
        return token
    }

    @Test func aPerTryTimerOfTheCallBeforeDoesNothingToTheNext() {
        var machine = Machine()
        let a = started(&machine)
        do {
            let result = machine.connectionReady(a)
            #expect(result == .send(a, perTryTimeout: .seconds(1), streamed: nil))
        }
        machine.responseHeadForwarded()
        machine.end()
        // Call B on the same connection, same try number as A's.
        let b = started(&machine)
        #expect(b.attempt == a.attempt && b != a)
        do {
            let result = machine.connectionReady(b)
            #expect(result == .send(b, perTryTimeout: .seconds(1), streamed: nil))
        }
        do {
            let result = machine.perTryTimerFired(a)
            #expect(result == .ignore)
        }
        do {
            let result = machine.perTryTimerFired(b)
            #expect(result == .timeOutTry)
        }
    }

    @Test func aTimerAfterItsCallEndedIsIgnored() {
        var machine = Machine()
        let a = started(&machine)
        _ = machine.connectionReady(a)
        machine.end()
        do {
            let result = machine.perTryTimerFired(a)
            #expect(result == .ignore)
        }
        #expect(!machine.inFlight)
    }

    @Test func aTryTimesOutWhileItsHeadIsReadButNotOnceForwarded() throws {
        var machine = Machine()
        let a = try startedWithPolicy(&machine)
        _ = machine.connectionReady(a)
        // Held for a body validator.
        #expect(machine.responseHead(ResponseHead(version: .http1_1, status: .ok, headers: [:]), holdsBody: true) == .hold)
        do {
            let result = machine.perTryTimerFired(a)
            #expect(result == .timeOutTry)
        }
        machine.responseHeadForwarded()
        do {
            let result = machine.perTryTimerFired(a)
            #expect(result == .ignore)
        }
        #expect(machine.responseForwarded)
    }

    @Test func aCompletionAfterTheClientWentAwayIsNotUsed() {
        var machine = Machine()
        guard case .runModifiers(let a) = machine.start(now: t0, timeout: .seconds(60), runsModifiers: true, perTryTimeout: nil) else {
            Issue.record("modifiers run first")
            return
        }
        machine.end()  // client reset the stream while the hooks ran
        do {
            let result = machine.modifiersFinished(a)
            #expect(result == .ignore)
        }
        do {
            let result = machine.connectionReady(a)
            #expect(result == .giveBack)
        }
        #expect(!machine.isCurrent(a))
    }

    @Test func aConnectionForAnEarlierTryGoesBack() {
        var machine = Machine()
        let first = started(&machine)
        _ = machine.connectionReady(first)
        guard case .wait(let second, let delay) = machine.retry(after: .milliseconds(300)) else {
            Issue.record("a retry with a delay waits")
            return
        }
        #expect(delay == .milliseconds(300) && second.attempt == 2)
        // The first try's timer and a connection for it are both stale now.
        do {
            let result = machine.perTryTimerFired(first)
            #expect(result == .ignore)
        }
        do {
            let result = machine.backoffElapsed(first)
            #expect(result == .ignore)
        }
        do {
            let result = machine.backoffElapsed(second)
            #expect(result == .acquireConnection(second))
        }
        do {
            let result = machine.connectionReady(first)
            #expect(result == .giveBack)
        }
        do {
            let result = machine.connectionReady(second)
            #expect(result == .send(second, perTryTimeout: .seconds(1), streamed: nil))
        }
    }

    @Test func aBackoffOfAnEndedCallStartsNothing() {
        var machine = Machine()
        let a = started(&machine)
        _ = machine.connectionReady(a)
        guard case .wait(let retry, _) = machine.retry(after: .seconds(1)) else { Issue.record("waits"); return }
        machine.end()
        let b = started(&machine)
        do {
            let result = machine.backoffElapsed(retry)
            #expect(result == .ignore)
        }
        guard case .acquiring(b) = machine.state else { Issue.record("the next call acquires"); return }
    }

    @Test func aRefreshCompletesOnlyForItsTry() {
        var machine = Machine()
        let a = started(&machine)
        _ = machine.connectionReady(a)
        let refresh = machine.refreshStarted()!
        do {
            let result = machine.credentialReady(a)
            #expect(result == .ignore)
        }
        do {
            let result = machine.credentialReady(refresh)
            #expect(result == .acquireConnection(refresh))
        }
        machine.end()
        do {
            let result = machine.credentialReady(refresh)
            #expect(result == .ignore)
        }
    }

    @Test func anUnsentRequestIsReplayedOnceAndAStreamedOneNever() {
        var machine = Machine()
        let a = started(&machine)
        _ = machine.connectionReady(a)
        guard case .acquireConnection(let replay)? = machine.replayUnsent() else { Issue.record("replayed once"); return }
        _ = machine.connectionReady(replay)
        do {
            let result = machine.replayUnsent()
            #expect(result == nil)
        }
        machine.end()
        guard case .acquireConnection(let streamed) = machine.start(now: t0, timeout: .seconds(60), runsModifiers: false, perTryTimeout: nil, streams: true) else {
            Issue.record("starts")
            return
        }
        _ = machine.connectionReady(streamed)
        do {
            let result = machine.replayUnsent()
            #expect(result == nil)
        }
    }

    @Test func aDrainedRefusalRetriesAfterItsDelay() {
        var machine = Machine()
        let a = started(&machine)
        _ = machine.connectionReady(a)
        machine.drainThenRetry(after: .milliseconds(50))
        #expect(machine.isDraining)
        do {
            let result = machine.perTryTimerFired(a)
            #expect(result == .ignore)
        }
        guard case .wait(let next, .milliseconds(50)) = machine.drained() else { Issue.record("waits after the drain"); return }
        #expect(next.attempt == 2)
        do {
            let result = machine.drained()
            #expect(result == .ignore)
        }
    }

    @Test func theCallsDeadlineIsItsOwn() {
        var machine = Machine()
        let a = started(&machine)
        _ = machine.connectionReady(a)
        #expect(machine.deadline == t0 + .seconds(60))
        do {
            let result = machine.deadlinePassed(now: t0 + .seconds(59))
            #expect(result == .wake(at: t0 + .seconds(60)))
        }
        do {
            let result = machine.deadlinePassed(now: t0 + .seconds(60))
            #expect(result == .timeOutCall(forwarded: false))
        }
        machine.responseHeadForwarded()
        do {
            let result = machine.deadlinePassed(now: t0 + .seconds(61))
            #expect(result == .timeOutCall(forwarded: true))
        }
        machine.end()
        // A wake-up after the call ended, and one for the next call's earlier start.
        do {
            let result = machine.deadlinePassed(now: t0 + .seconds(61))
            #expect(result == .ignore)
        }
        _ = machine.start(now: t0 + .seconds(61), timeout: .seconds(1), runsModifiers: false, perTryTimeout: nil)
        do {
            let result = machine.deadlinePassed(now: t0 + .seconds(61.5))
            #expect(result == .wake(at: t0 + .seconds(62)))
        }
    }

    static let head = ResponseHead(version: .http1_1, status: .ok, headers: [:])

    @Test func aHeadIsHeldJudgedOrForwardedAsTheRouteJudgesTries() throws {
        var plain = Machine()
        let plainTry = started(&plain)
        _ = plain.connectionReady(plainTry)
        #expect(plain.responseHead(Self.head, holdsBody: false) == .forward)
        var judged = Machine()
        let judgedTry = try startedWithPolicy(&judged)
        _ = judged.connectionReady(judgedTry)
        #expect(judged.responseHead(Self.head, holdsBody: false) == .judge)
        #expect(!judged.isHolding)
        var held = Machine()
        let heldTry = try startedWithPolicy(&held)
        _ = held.connectionReady(heldTry)
        #expect(held.responseHead(Self.head, holdsBody: true) == .hold)
        _ = held.heldBody(ByteBuffer(string: "ok"), limit: 10)
        // Its end gives the whole answer back to be judged.
        #expect(held.responseEnded() == .judgeHeld(head: Self.head, body: Array("ok".utf8)))
        #expect(plain.responseEnded() == .finish)
    }

    @Test func aFailedTryIsReplayedJudgedCutShortOrFailedByWhereItStopped() throws {
        var random = SystemRandomNumberGenerator()
        let reset = UpstreamError.reset("closed"), refused = UpstreamError.connectFailure("refused")
        func failed(_ machine: inout Machine, _ error: UpstreamError, _ progress: TryProgress) -> Machine.Judged {
            machine.tryFailed(error, progress: progress, now: t0, random: &random, retryAllowed: { true })
        }
        // Unsent: replayed once, unasked (logged as such); then the retry policy judges.
        var machine = Machine()
        let a = try startedWithPolicy(&machine)
        _ = machine.connectionReady(a)
        let replayed = failed(&machine, reset, .unsent)
        guard case .retry(next: .acquireConnection(let replay)) = replayed.verdict else {
            Issue.record("an unsent request is replayed")
            return
        }
        #expect(replayed.decided == .retry(after: .zero, reason: "unsent"))
        _ = machine.connectionReady(replay)
        // The replay was free: the policy's second try is the next.
        guard case .retry(next: .acquireConnection(let second)) = failed(&machine, reset, .unsent).verdict, second.attempt == 3 else {
            Issue.record("the policy retries a reset")
            return
        }
        _ = machine.connectionReady(second)
        // Its attempts are spent: the gateway's 502.
        #expect(failed(&machine, reset, .sent).verdict == .forward)
        // A connect failure is never replayed unasked: the policy judges it.
        var connect = Machine()
        let c = try startedWithPolicy(&connect)
        let counted = connect.connectFailed(c)
        #expect(counted)
        let judged = failed(&connect, refused, .unsent)
        guard case .retry(next: .acquireConnection) = judged.verdict, case .retry? = judged.decided else {
            Issue.record("the policy retries a connect failure")
            return
        }
        // Without a policy: a 502, or cut short once the response went to the client.
        var plain = Machine()
        let plainTry = started(&plain)
        _ = plain.connectionReady(plainTry)
        #expect(failed(&plain, reset, .sent) == Machine.Judged(verdict: .forward))
        plain.responseHeadForwarded()
        #expect(failed(&plain, reset, .responseStarted) == Machine.Judged(verdict: .cutShort))
        // A drained refusal whose connection fails: its retry starts, whatever the progress.
        var draining = Machine()
        let drainingTry = try startedWithPolicy(&draining)
        _ = draining.connectionReady(drainingTry)
        draining.drainThenRetry(after: .zero)
        guard case .retry(next: .acquireConnection(let next)) = failed(&draining, reset, .responseStarted).verdict else {
            Issue.record("the retry starts")
            return
        }
        #expect(next.attempt == 2)
        // A drain that ends well starts it too.
        var drained = Machine()
        let drainedTry = try startedWithPolicy(&drained)
        _ = drained.connectionReady(drainedTry)
        drained.drainThenRetry(after: .milliseconds(5))
        guard case .wait(let later, .milliseconds(5)) = drained.responseEnded() else { Issue.record("waits, then retries"); return }
        #expect(later.attempt == 2)
    }

    @Test func aHeldAnswerGrowsUntilJudgedOrTooLarge() throws {
        var machine = Machine()
        let a = try startedWithPolicy(&machine)
        _ = machine.connectionReady(a)
        #expect(machine.responseHead(Self.head, holdsBody: true) == .hold)
        #expect(machine.heldBody(ByteBuffer(string: "abc"), limit: 5) == nil)
        #expect(machine.held?.body == Array("abc".utf8))
        // Past the limit it is let through as it is, and the try can no longer be timed out.
        let released = machine.heldBody(ByteBuffer(string: "def"), limit: 5)
        #expect(released?.body == Array("abcdef".utf8) && released?.head == Self.head)
        machine.responseHeadForwarded()
        #expect(machine.held == nil && machine.responseForwarded)
        do {
            let result = machine.perTryTimerFired(a)
            #expect(result == .ignore)
        }
    }

    @Test func aStreamedBodyWaitsForItsConnectionAndOutlivesItsCall() {
        var machine = Machine()
        guard case .acquireConnection(let a) = machine.start(now: t0, timeout: .seconds(60), runsModifiers: false, perTryTimeout: nil,
                                                             streams: true) else { Issue.record("starts"); return }
        let first = ByteBuffer(string: "one"), second = ByteBuffer(string: "two")
        #expect(machine.bodyPart(first) == .ignore)
        // The parts read before the connection go with the head, in order.
        #expect(machine.connectionReady(a) == .send(a, perTryTimeout: nil, streamed: .init(pending: [first], end: false)))
        #expect(machine.bodyPart(second) == .sendBody(second))
        // The call ends first (answered early): the rest is read and dropped.
        machine.end()
        #expect(machine.bodyAbandoned() == .resumeClient)
        #expect(machine.bodyPart(first) == .ignore)
        #expect(machine.bodyEnded() == .resumeClient && machine.streamed == nil)
    }

    @Test func aBodyThatEndedBeforeItsConnectionIsSentWhole() {
        var machine = Machine()
        guard case .acquireConnection(let a) = machine.start(now: t0, timeout: .seconds(60), runsModifiers: false, perTryTimeout: nil,
                                                             streams: true) else { Issue.record("starts"); return }
        let part = ByteBuffer(string: "all")
        _ = machine.bodyPart(part)
        #expect(machine.bodyEnded() == .ignore)
        #expect(machine.connectionReady(a) == .send(a, perTryTimeout: nil, streamed: .init(pending: [part], end: true)))
        #expect(machine.streamed == nil)
    }

    @Test func oneTriesCountDrivesTheRetryPolicyAndUnsentReplaysAreFree() throws {
        let config = try ConfigLoader.load(yaml: """
            listeners: [{address: 127.0.0.1:0}]
            routes: [{name: r, upstream: echo, retry: {attempts: 2, on: [503], backoff: {strategy: immediate}}}]
            """).config
        var random = SystemRandomNumberGenerator()
        var machine = Machine()
        let retry = RetryState<ContinuousClock.Instant>(policy: config.routes[0].retry, validators: [], method: "GET", replayable: true, deadline: nil)
        guard case .acquireConnection(let a) = machine.start(now: t0, timeout: .seconds(10), runsModifiers: false, perTryTimeout: nil,
                                                             retry: retry) else { Issue.record("starts"); return }
        // The machine's deadline is the policy's.
        #expect(machine.retry?.deadline == t0 + .seconds(10))
        _ = machine.connectionReady(a)
        guard case .acquireConnection(let replay)? = machine.replayUnsent() else { Issue.record("replays"); return }
        _ = machine.connectionReady(replay)
        #expect(machine.tries == 2)
        let refused = TryOutcome.response(status: 503, headers: [:], body: nil)
        #expect(machine.tryFinished(refused, now: t0, random: &random) == .retry(after: .zero, reason: "status-503"))
        guard case .acquireConnection(let b) = machine.retry(after: .zero) else { Issue.record("retries"); return }
        _ = machine.connectionReady(b)
        #expect(machine.tries == 3)
        #expect(machine.tryFinished(refused, now: t0, random: &random) == .giveUp(reason: "status-503: attempts spent"))
        // Its outcome is told to the endpoint once.
        #expect(machine.judge() && !machine.judge())
    }

    @Test func aRefusedAnswerIsDrainedWhenSmallAndItsConnectionHeldAndTheBudgetMaySayNo() throws {
        let config = try ConfigLoader.load(yaml: """
            listeners: [{address: 127.0.0.1:0}]
            routes: [{name: r, upstream: echo, retry: {attempts: 3, on: [503], backoff: {strategy: immediate}}}]
            """).config
        var random = SystemRandomNumberGenerator()
        func started() -> (Machine, Token)? {
            var machine = Machine()
            let retry = RetryState<ContinuousClock.Instant>(policy: config.routes[0].retry, validators: [], method: "GET", replayable: true,
                                                             deadline: nil)
            guard case .acquireConnection(let a) = machine.start(now: t0, timeout: .seconds(10), runsModifiers: false, perTryTimeout: nil,
                                                                 retry: retry) else { return nil }
            _ = machine.connectionReady(a)
            return (machine, a)
        }
        let small = TryOutcome.response(status: 503, headers: ["Content-Length": "12"], body: nil)
        let large = TryOutcome.response(status: 503, headers: ["Content-Length": "\(Machine.drainLimit + 1)"], body: nil)
        guard case (var machine, let a)? = started() else { Issue.record("starts"); return }
        #expect(machine.judge(small, now: t0, random: &random, connectionHeld: true, retryAllowed: { true }).verdict == .drain)
        #expect(machine.isDraining && machine.perTryTimerFired(a) == .ignore)
        guard case .acquireConnection(let b) = machine.drained(), b.attempt == 2 else { Issue.record("retries after the drain"); return }
        // Too large to drain, or its connection already gone: dropped, and the next try starts.
        _ = machine.connectionReady(b)
        guard case .retry(next: .acquireConnection(let c)) = machine.judge(large, now: t0, random: &random, connectionHeld: true,
                                                                           retryAllowed: { true }).verdict, c.attempt == 3
        else { Issue.record("drops a large refusal"); return }
        // The budget says no: the answer goes to the client as it is.
        guard var (spent, _) = started() else { Issue.record("starts"); return }
        let judged = spent.judge(small, now: t0, random: &random, connectionHeld: true, retryAllowed: { false })
        #expect(judged.verdict == .forward && judged.decided == .giveUp(reason: "retry budget spent"))
    }
}
