import Testing
@testable import Gateway

/// How an HTTP/1.1 client connection reads and ends, without sockets.
@Suite(.ownThreads) struct HTTP1ConnectionStateMachineTests {
    @Test func keepAliveReadsTheNextPipelinedRequest() {
        var machine = HTTP1ConnectionStateMachine()
        let action = machine.responseEnded(close: false, unreadInput: true)
        #expect(action == .parse && machine.readsRequests)
    }

    @Test func closingWithInputUnreadLingersAndReadsToDropIt() {
        var machine = HTTP1ConnectionStateMachine()
        let paused = machine.callWantsInput(false)
        let tooMuch = machine.waiting(tooMuch: true)
        #expect(paused && !tooMuch && !machine.readOpen)
        let action = machine.responseEnded(close: true, unreadInput: true)
        #expect(action == .lingerAfterWrites && !machine.readsRequests && machine.readOpen)
    }

    @Test func closingWithNothingUnreadClosesOnceWritten() {
        var machine = HTTP1ConnectionStateMachine()
        let action = machine.responseEnded(close: true, unreadInput: false)
        #expect(action == .closeAfterWrites)
    }

    @Test func aHalfClosedClientGetsItsAnswersThenTheConnectionCloses() {
        var machine = HTTP1ConnectionStateMachine()
        let ended = machine.inputEnded(midRequest: false)
        #expect(ended == .parse)
        // Closing need not linger: the client sends nothing more.
        let response = machine.responseEnded(close: true, unreadInput: true)
        #expect(response == .closeAfterWrites)
        var pipelined = HTTP1ConnectionStateMachine()
        _ = pipelined.inputEnded(midRequest: false)
        let kept = pipelined.responseEnded(close: false, unreadInput: true)
        let idle = pipelined.idleAfterParse()
        let again = pipelined.idleAfterParse()
        #expect(kept == .parse && idle == .closeAfterWrites && again == .none)
    }

    @Test func aRequestCutShortByTheClientClosesAtOnce() {
        var machine = HTTP1ConnectionStateMachine()
        let action = machine.inputEnded(midRequest: true)
        #expect(action == .close)
    }

    @Test func nothingIsReadAfterAMalformedRequest() {
        var machine = HTTP1ConnectionStateMachine()
        machine.malformed()
        let ended = machine.inputEnded(midRequest: false)
        let idle = machine.idleAfterParse()
        #expect(!machine.readsRequests && ended == .close && idle == .none)
    }

    @Test func theReadGateOpensOnlyWhenBothAllow() {
        var machine = HTTP1ConnectionStateMachine()
        let full = machine.waiting(tooMuch: true)
        let paused = machine.callWantsInput(false)
        let resumed = machine.callWantsInput(true)
        #expect(full && !paused && !resumed && !machine.readOpen)
        let drained = machine.waiting(tooMuch: false)
        #expect(drained && machine.readOpen)
    }
}
