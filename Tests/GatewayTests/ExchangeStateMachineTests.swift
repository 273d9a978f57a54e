import Testing
@testable import Gateway

/// One connection's or stream's exchanges without sockets: waits, pipelining,
/// drain, malformed input, and one access line per exchange. (`#expect`
/// cannot hold a mutating call: each event's result is taken first.)
@Suite(.ownThreads) struct ExchangeStateMachineTests {
    typealias Machine = ExchangeStateMachine<ContinuousClock.Instant>
    let t0 = ContinuousClock.now

    @Test func twoExchangesInARowOnOneConnection() {
        var machine = Machine()
        let headWait = machine.connectionStarted(now: t0, headerTimeout: .seconds(10))
        #expect(headWait == t0 + .seconds(10))
        machine.requestHead()
        let afterHead = machine.timerFired(now: t0 + .seconds(11))
        #expect(afterHead == nil)  // the head came: no wait runs
        machine.requestEnded()
        machine.callStarted()
        let logged = machine.logOnce()
        let first = machine.responseEnded(keepAlive: true, now: t0 + .seconds(1), idleTimeout: .seconds(5))
        #expect(logged && first.keepOpen && first.wake == t0 + .seconds(6) && machine.isIdle)
        // The first exchange's wait ends with the second's head.
        machine.requestHead()
        let stale = machine.timerFired(now: t0 + .seconds(7))
        let once = machine.logOnce(), twice = machine.logOnce()
        #expect(stale == nil && once && !twice)
        machine.requestEnded()
        let second = machine.responseEnded(keepAlive: false, now: t0 + .seconds(8), idleTimeout: .seconds(5))
        #expect(!second.keepOpen && second.wake == nil)
    }

    @Test func waitsEndAsNoHeadOrAStalledBody() {
        var machine = Machine()
        let deadline = machine.connectionStarted(now: t0, headerTimeout: .seconds(10))
        let early = machine.timerFired(now: t0 + .seconds(9))
        let due = machine.timerFired(now: deadline)
        let again = machine.timerFired(now: deadline)
        #expect(early == .notYet(deadline) && due == .noHead && again == nil)
        machine.requestHead()
        _ = machine.bodyExpected(now: t0, idleTimeout: .seconds(5))
        _ = machine.bodyExpected(now: t0 + .seconds(4), idleTimeout: .seconds(5))
        let moved = machine.timerFired(now: t0 + .seconds(6))
        let stalled = machine.timerFired(now: t0 + .seconds(9))
        #expect(moved == .notYet(t0 + .seconds(9)) && stalled == .bodyStalled)
    }

    @Test func aResponseBeforeTheRequestEndedKeepsReadingIt() {
        var machine = Machine()
        machine.requestHead()
        _ = machine.logOnce()  // refused early (413), body still coming
        let ended = machine.responseEnded(keepAlive: true, now: t0, idleTimeout: .seconds(5))
        #expect(ended.keepOpen && !machine.isIdle)
        let stalled = machine.timerFired(now: t0 + .seconds(5))
        #expect(stalled == .bodyStalled)
        machine.requestEnded()
        #expect(machine.isIdle)
    }

    @Test func drainClosesAnIdleConnectionAtOnceAndABusyOneAfterItsResponse() {
        var idle = Machine()
        let idleCloses = idle.quiesce()
        var busy = Machine()
        busy.requestHead()
        let busyCloses = busy.quiesce()
        busy.requestEnded()
        _ = busy.logOnce()
        let ended = busy.responseEnded(keepAlive: true, now: t0, idleTimeout: .seconds(5))
        #expect(idleCloses && !busyCloses && !ended.keepOpen)
    }

    @Test func aResponseCutShortIsLoggedOnceWhenTheClientGoes() {
        var machine = Machine()
        machine.requestHead()
        machine.requestEnded()
        let cutShort = machine.logOnce()
        let clientGone = machine.logOnce()
        #expect(cutShort && !clientGone)
        machine.clientGone()
        let afterwards = machine.logOnce()
        #expect(!afterwards && !machine.isIdle)
    }

    @Test func aClientGoneMidCallIsLoggedAndAnIdleConnectionIsNot() {
        var machine = Machine()
        machine.requestHead()
        let midCall = machine.logOnce()
        var waiting = Machine()
        _ = waiting.connectionStarted(now: t0, headerTimeout: .seconds(1))
        let noRequest = waiting.logOnce()
        #expect(midCall && !noRequest)
    }

    @Test func malformedInputIsAnsweredOnceOrClosed() {
        var fresh = Machine()
        let beforeAnyHead = fresh.malformed()
        let logged = fresh.logOnce()
        #expect(beforeAnyHead == .answer(forCurrentRequest: false) && logged)
        var midBody = Machine()
        midBody.requestHead()
        let inBody = midBody.malformed()
        #expect(inBody == .answer(forCurrentRequest: true))
        var answered = Machine()
        answered.requestHead()
        _ = answered.logOnce()
        _ = answered.responseEnded(keepAlive: true, now: t0, idleTimeout: .seconds(5))
        let afterResponse = answered.malformed()
        #expect(afterResponse == .close)
    }
}
