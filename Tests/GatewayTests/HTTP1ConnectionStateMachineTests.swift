import NIOCore
import Testing
@testable import Gateway

/// How an HTTP/1.1 client connection reads and ends, without sockets.
@Suite(.ownThreads) struct HTTP1ConnectionStateMachineTests {
    @Test func keepAliveReadsTheNextPipelinedRequest() {
        var machine = HTTP1ConnectionStateMachine()
        machine.requestHead()
        #expect(machine.acceptsRequestParts)  // its own body
        machine.requestEnded()
        #expect(!machine.acceptsRequestParts)  // the next request waits
        let action = machine.answered(close: false, unreadInput: true)
        #expect(action == .parse && machine.readsRequests && machine.acceptsRequestParts && machine.state == .open(inputEnded: false) && machine.exchange.phase == .awaitingHead)
    }

    @Test func anAnswerBeforeItsRequestEndedKeepsReadingTheBody() {
        var machine = HTTP1ConnectionStateMachine()
        machine.requestHead()
        // Refused early (413), the body still coming: read to its end, then idle.
        _ = machine.answered(close: false, unreadInput: true)
        #expect(machine.acceptsRequestParts && machine.state == .open(inputEnded: false)
                && machine.exchange.phase == .exchanging(reading: true, responding: false, logged: false))
        machine.requestEnded()
        #expect(machine.state == .open(inputEnded: false) && machine.exchange.phase == .awaitingHead)
    }

    @Test func aHalfClosedClientWithACallInFlightIsNotClosedUnderIt() {
        var machine = HTTP1ConnectionStateMachine()
        machine.requestHead()
        machine.requestEnded()
        _ = machine.inputEnded(midRequest: false)
        #expect(machine.state == .open(inputEnded: true) && machine.exchange.phase == .exchanging(reading: false, responding: true, logged: false))
        let busy = machine.idleAfterParse()
        _ = machine.answered(close: false, unreadInput: false)
        let idle = machine.idleAfterParse()
        #expect(busy == .none && idle == .closeAfterWrites)
    }

    @Test func closingWithInputUnreadLingersAndReadsToDropIt() {
        var machine = HTTP1ConnectionStateMachine()
        let paused = machine.callWantsInput(false)
        let tooMuch = machine.waiting(tooMuch: true)
        #expect(paused && !tooMuch && !machine.readOpen)
        let action = machine.answered(close: true, unreadInput: true)
        #expect(action == .lingerAfterWrites && !machine.readsRequests && machine.readOpen)
    }

    @Test func closingWithNothingUnreadClosesOnceWrittenAndReadsNoMore() {
        var machine = HTTP1ConnectionStateMachine()
        machine.requestHead()
        machine.requestEnded()
        let action = machine.answered(close: true, unreadInput: false)
        // A request pipelined behind the closing answer is never handed on.
        #expect(action == .closeAfterWrites && !machine.readsRequests && !machine.acceptsRequestParts)
    }

    @Test func theBadRequestAnswerOfAMalformedRequestLingers() {
        var machine = HTTP1ConnectionStateMachine()
        machine.requestHead()
        machine.malformed()
        let action = machine.answered(close: true, unreadInput: true)
        #expect(action == .lingerAfterWrites && machine.state == .discarding)
    }

    @Test func aHalfClosedClientGetsItsAnswersThenTheConnectionCloses() {
        var machine = HTTP1ConnectionStateMachine()
        let ended = machine.inputEnded(midRequest: false)
        #expect(ended == .parse)
        // Closing need not linger: the client sends nothing more.
        let response = machine.answered(close: true, unreadInput: true)
        #expect(response == .closeAfterWrites)
        var pipelined = HTTP1ConnectionStateMachine()
        _ = pipelined.inputEnded(midRequest: false)
        let kept = pipelined.answered(close: false, unreadInput: true)
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

    @Test func aCallsPauseEndsWithItsBodyOrItsAnswer() {
        // Paused while its upstream could not take more; the body's end was read meanwhile.
        var machine = HTTP1ConnectionStateMachine()
        machine.requestHead()
        let paused = machine.callWantsInput(false)
        let opened = machine.requestEnded()
        #expect(paused && opened && machine.readOpen)
        // Answered before its body ended: the rest is read to be dropped.
        var answered = HTTP1ConnectionStateMachine()
        answered.requestHead()
        _ = answered.callWantsInput(false)
        let action = answered.answered(close: false, unreadInput: true)
        #expect(action == .parse && answered.readOpen && answered.acceptsRequestParts)
        // Bytes waiting behind an answer still hold the gate: only the call's reason goes.
        var full = HTTP1ConnectionStateMachine()
        full.requestHead()
        _ = full.callWantsInput(false)
        _ = full.waiting(tooMuch: true)
        let still = full.requestEnded()
        #expect(!still && !full.readOpen)
    }
}

extension HTTP1ConnectionStateMachine {
    /// An answer ends as the call's side ends it: its exchange first
    /// (`ClientExchange.finishExchange`), then the connection.
    fileprivate mutating func answered(close: Bool, unreadInput: Bool) -> Action {
        _ = exchange.responseEnded(keepAlive: !close, now: LoopInstant(deadline: .uptimeNanoseconds(0)), idleTimeout: nil)
        return responseEnded(close: close, unreadInput: unreadInput)
    }
}
