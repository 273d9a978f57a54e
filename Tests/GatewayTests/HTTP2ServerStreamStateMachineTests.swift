import NIOCore
import NIOHTTP1
import Testing
@testable import Gateway

/// How one HTTP/2 server stream moves through its request, its answer and
/// its tunnel, without a session or a socket.
@Suite(.ownThreads) struct HTTP2ServerStreamStateMachineTests {
    private static let ok = ResponseHead(version: .http2, status: .ok, headers: ["Content-Type": "text/plain"])

    private static func read(_ machine: inout HTTP2ServerStreamStateMachine, max: Int = 64) -> (bytes: Int, end: Bool, trailers: HTTPHeaders?)? {
        var storage = [UInt8](repeating: 0, count: max)
        let (read, trailers) = storage.withUnsafeMutableBytes { machine.read(into: $0) }
        guard case .bytes(let count, let end) = read else { return nil }
        return (count, end, trailers)
    }

    @Test func aWholeAnswerIsOneHeadersFrameWithNoData() {
        var machine = HTTP2ServerStreamStateMachine()
        machine.headersEnded(connect: false)
        let end = machine.requestEnded()
        #expect(end == .tellCall)
        let interim = machine.writeHead(Self.ok)
        #expect(interim == nil)
        let ending = machine.responseEnded(close: false)
        #expect(ending == .flush)
        guard case .submit(let head, let body) = machine.submit() else { Issue.record("nothing submitted"); return }
        #expect(head.status == .ok && !body)
        // Submitted once.
        guard case .none = machine.submit() else { Issue.record("submitted twice"); return }
    }

    @Test func aStreamedAnswerIsDeferredThenResumedAndEndsWithItsTrailers() {
        var machine = HTTP2ServerStreamStateMachine()
        machine.headersEnded(connect: false)
        _ = machine.writeHead(Self.ok)
        guard case .submit(_, body: true) = machine.submit() else { Issue.record("head not submitted with a body to follow"); return }
        // libnghttp2 asks before any body is queued: deferred.
        #expect(Self.read(&machine) == nil)
        machine.writeBody(ByteBuffer(string: "abc"))
        guard case .resume = machine.submit() else { Issue.record("no resume"); return }
        let first = Self.read(&machine)
        #expect(first?.bytes == 3 && first?.end == false)
        // The queue is empty again: libnghttp2 defers until the end comes.
        #expect(Self.read(&machine) == nil)
        let ending = machine.writeEnd(trailers: ["Grpc-Status": "0"])
        #expect(ending == .flush)
        guard case .resume = machine.submit() else { Issue.record("the end did not resume the deferred stream"); return }
        let last = Self.read(&machine)
        #expect(last?.bytes == 0 && last?.end == true && last?.trailers?["Grpc-Status"] == ["0"])
        // The trailers go once.
        #expect(Self.read(&machine)?.trailers == nil)
    }

    @Test func trailersWrittenBeforeTheFlushKeepTheHeadFromEndingTheStream() {
        var machine = HTTP2ServerStreamStateMachine()
        machine.headersEnded(connect: false)
        _ = machine.writeHead(Self.ok)
        _ = machine.writeEnd(trailers: ["X-Checksum": "1"])
        guard case .submit(_, body: true) = machine.submit() else { Issue.record("the head ended the stream before its trailers"); return }
        #expect(Self.read(&machine)?.trailers?["X-Checksum"] == ["1"])
    }

    @Test func anInterimHeadGoesAtOnceAndTheFinalOneIsHeld() {
        var machine = HTTP2ServerStreamStateMachine()
        machine.headersEnded(connect: false)
        let interim = machine.writeHead(ResponseHead(version: .http2, status: .continue, headers: [:]))
        #expect(interim?.status == .continue)
        let final = machine.writeHead(Self.ok)
        #expect(final == nil)
    }

    @Test func theRequestBodyGoesToTheCallUntilItsEndThenOnlyReopensTheWindow() {
        var machine = HTTP2ServerStreamStateMachine()
        machine.headersEnded(connect: false)
        let data = machine.received(10)
        #expect(data == (.call, 10))
        // The call paused: the bytes wait unconsumed, and are credited when it resumes.
        let credit = machine.setReading(false)
        #expect(credit == 0)
        let data2 = machine.received(7)
        #expect(data2 == (.call, 0))
        let credit2 = machine.setReading(true)
        #expect(credit2 == 7)
        let end = machine.requestEnded()
        #expect(end == .tellCall)
        let end2 = machine.requestEnded()
        #expect(end2 == .none)
        let data3 = machine.received(5)
        #expect(data3 == (.drop, 5))
    }

    @Test func anAnswerThatEndsAndClosesFirstLingersThenResets() {
        var machine = HTTP2ServerStreamStateMachine()
        machine.headersEnded(connect: false)
        _ = machine.writeHead(Self.ok)
        let ending = machine.responseEnded(close: true)
        #expect(ending == .flushThenLinger)
        // What still comes is read and dropped, never the call's.
        let data = machine.received(100)
        #expect(data == (.drop, 100))
        #expect(machine.lingerEnded())
        // A request that ends while lingering needs no reset: a late timer does nothing.
        let end = machine.requestEnded()
        #expect(end == .none)
        #expect(!machine.lingerEnded())
    }

    @Test func anAnswerAfterTheRequestEndedNeverLingers() {
        var machine = HTTP2ServerStreamStateMachine()
        machine.headersEnded(connect: false)
        _ = machine.requestEnded()
        _ = machine.writeHead(Self.ok)
        let ending = machine.responseEnded(close: true)
        #expect(ending == .flush)
        #expect(!machine.lingerEnded())
        // Both sides ended: nothing to cancel.
        let reset = machine.cancel()
        #expect(!reset)
    }

    @Test func aCancelledStreamTakesNoMoreWritesAndCountsWhatItNeverConsumed() {
        var machine = HTTP2ServerStreamStateMachine()
        machine.headersEnded(connect: false)
        _ = machine.setReading(false)
        _ = machine.received(9)
        let reset = machine.cancel()
        #expect(reset)
        #expect(!machine.isOpen && !machine.cancel())
        let interim = machine.writeHead(Self.ok)
        #expect(interim == nil)
        machine.writeBody(ByteBuffer(string: "late"))
        guard case .none = machine.submit() else { Issue.record("a closed stream submitted"); return }
        let ending = machine.responseEnded(close: false)
        #expect(ending == .none)
        let data = machine.received(4)
        #expect(data == (.drop, 4))
        let unconsumed = machine.closed()
        #expect(unconsumed == 9)
    }

    @Test func aBlockRefusedWholeWithEndStreamIsOverWithoutTellingTheCall() {
        var machine = HTTP2ServerStreamStateMachine()
        machine.headersEnded(connect: false, ended: true)
        let end = machine.requestEnded()
        #expect(end == .none)
        let data = machine.received(3)
        #expect(data == (.drop, 3))
    }

    @Test func dataOnAStreamWhoseHeadersNeverEndedOnlyReopensTheWindow() {
        var machine = HTTP2ServerStreamStateMachine()
        let data = machine.received(8)
        #expect(data == (.drop, 8))
        let end = machine.requestEnded()
        #expect(end == .none)
    }

    // MARK: Extended CONNECT (RFC 8441)

    @Test func dataBeforeTheSwitchIsKeptUnconsumedThenGoesThroughFirst() {
        var machine = HTTP2ServerStreamStateMachine()
        machine.headersEnded(connect: true)
        #expect(machine.canTunnel)
        // Kept, and the window stays shut on it: the stream's window bounds it.
        let data = machine.received(5)
        #expect(data == (.early, 0))
        machine.keepEarly(ByteBuffer(string: "hello"))
        let data2 = machine.received(1)
        #expect(data2 == (.early, 0))
        machine.keepEarly(ByteBuffer(string: "!"))
        // The switch: 101 becomes 200 without the upgrade's fields.
        let switching = ResponseHead(version: .http1_1, status: .switchingProtocols,
                                     headers: ["Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Accept": "x", "X-Request-Id": "r"])
        let interim = machine.writeHead(switching)
        #expect(interim == nil)
        guard case .submit(let head, body: true) = machine.submit() else { Issue.record("no 200"); return }
        #expect(head.status == .ok && head.headers["Upgrade"] == nil && head.headers["Sec-WebSocket-Accept"] == nil && head.headers["X-Request-Id"] == "r")
        let switched = machine.switched()
        #expect(switched?.early.map { String(buffer: $0) } == ["hello", "!"] && switched?.consume == 6)
        #expect(!machine.canTunnel && machine.switched()?.early == nil)
        let data3 = machine.received(4)
        #expect(data3 == (.tunnel, 4))
        let end = machine.requestEnded()
        #expect(end == .closeTunnel)
    }

    @Test func aConnectAnsweredWithoutASwitchKeepsNothingMore() {
        var machine = HTTP2ServerStreamStateMachine()
        machine.headersEnded(connect: true)
        let problem = ResponseHead(version: .http2, status: .badGateway, headers: [:])
        let interim = machine.writeHead(problem)
        #expect(interim == nil)
        let ending = machine.responseEnded(close: false)
        #expect(ending == .flush)
        // No tunnel will come: what arrives is dropped, not kept.
        let data = machine.received(1000)
        #expect(data == (.drop, 1000))
        let switched = machine.switched()
        #expect(switched?.early.isEmpty ?? true)
    }

    @Test func aConnectWhoseClientEndsBeforeTheSwitchIsCancelled() {
        var machine = HTTP2ServerStreamStateMachine()
        machine.headersEnded(connect: true)
        let end = machine.requestEnded()
        #expect(end == .cancel)
        let reset = machine.cancel()
        #expect(reset)
        let switched = machine.switched()
        #expect(switched?.early == nil)
    }

    @Test func a101OnAPlainRequestIsNoSwitch() {
        var machine = HTTP2ServerStreamStateMachine()
        machine.headersEnded(connect: false)
        // Only a CONNECT's 101 becomes the 200; HTTP/2 has no 101 (RFC 9113 §8.1): never sent.
        let interim = machine.writeHead(ResponseHead(version: .http1_1, status: .switchingProtocols, headers: [:]))
        #expect(interim == nil)
        guard case .none = machine.submit() else { Issue.record("a 101 was submitted"); return }
        let switched = machine.switched()
        #expect(switched?.early == nil)
    }
}
