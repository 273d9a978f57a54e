import Testing
@testable import Gateway

/// The orderings of an upstream connection's events, without sockets: it
/// goes back to the pool only when every byte it read belonged to the answer.
@Suite(.ownThreads) struct HTTP1UpstreamStateMachineTests {
    typealias Machine = HTTP1UpstreamStateMachine

    static func answered(keepAlive: Bool = true) -> Machine {
        var machine = Machine()
        machine.requestStarted(keepAlive: keepAlive)
        #expect(machine.bytesArrived() == .reuse)
        return machine
    }

    @Test func aCleanAnswerIsReusedAndTheNextRequestMayGo() {
        var machine = Self.answered()
        #expect(machine.responseEnded(requestComplete: true, trailing: false, announcedBodyWithheld: false, mustClose: false) == .reuse)
        #expect(machine.state == .idle)
        machine.requestStarted(keepAlive: true)
        #expect(machine.isExchanging)
    }

    /// Stray bytes before the next request is written: they came while idle.
    @Test func bytesWhileIdleCloseIt() {
        var machine = Self.answered()
        #expect(machine.responseEnded(requestComplete: true, trailing: false, announcedBodyWithheld: false, mustClose: false) == .reuse)
        #expect(machine.bytesArrived() == .close)
        #expect(machine.state == .closed)
        // Nothing is sent on it after that.
        machine.requestStarted(keepAlive: true)
        #expect(!machine.isExchanging)
    }

    /// Stray bytes in the same segment as the answer: behind its end.
    @Test func bytesBehindTheAnswerCloseIt() {
        var machine = Self.answered()
        #expect(machine.responseEnded(requestComplete: true, trailing: true, announcedBodyWithheld: false, mustClose: false) == .close)
        #expect(machine.state == .closed)
    }

    /// Stray bytes just after the next request is written: an answer whose
    /// announced body was withheld by rule (HEAD, 204, 304) may still be
    /// followed by it, so no next request is ever written on it.
    @Test func anAnswerWhoseBodyMayStillComeIsNeverFollowedByAnotherRequest() {
        var machine = Self.answered()
        #expect(machine.responseEnded(requestComplete: true, trailing: false, announcedBodyWithheld: true, mustClose: false) == .close)
        machine.requestStarted(keepAlive: true)
        #expect(machine.state == .closed)
        #expect(machine.bytesArrived() == .close)
    }

    @Test func closeOrAnUnfinishedRequestBodyCloseIt() {
        var machine = Self.answered(keepAlive: false)
        #expect(machine.responseEnded(requestComplete: true, trailing: false, announcedBodyWithheld: false, mustClose: false) == .close)
        machine = Self.answered()
        #expect(machine.responseEnded(requestComplete: true, trailing: false, announcedBodyWithheld: false, mustClose: true) == .close)
        machine = Machine()
        machine.requestStarted(keepAlive: true)
        // The answer came before the streamed body ended.
        #expect(machine.responseEnded(requestComplete: false, trailing: false, announcedBodyWithheld: false, mustClose: false) == .close)
    }

    @Test func aTunnelReadsBytesAndThePoolIsToldOfACloseOnce() {
        var machine = Self.answered()
        machine.switched()
        #expect(machine.bytesArrived() == .reuse)
        machine.close()
        #expect(machine.state == .tunnel)
        let first = machine.closed(), second = machine.closed()
        #expect(first && !second)
    }
}
