import NIOCore

/// What a stream of either leg keeps, as a value: the body it sends
/// (queued, taken by libnghttp2 as the windows allow, deferred while the
/// queue is empty) and the flow control of what it receives (consumed at
/// once while its reader reads, else counted and consumed when it resumes,
/// so a paused reader keeps the stream's window shut). The server's stream
/// (a call's request and response) and the upstream's (a try's) hold one
/// each and add only their own side.
struct HTTP2StreamState {
    enum Read: Equatable {
        /// `count` bytes were copied; `end`: the body is over.
        case bytes(Int, end: Bool)
        /// Nothing yet: libnghttp2 waits for the stream to be resumed.
        case deferred
    }

    private(set) var outbound = BodyQueue()
    private(set) var open = true
    /// libnghttp2 found the queue empty and waits for a resume.
    private var deferred = false
    private var reading = true
    /// Bytes received while not reading: consumed when reading resumes.
    private var unconsumed = 0

    var sendingEnded: Bool { outbound.ended }

    /// Whether what is queued fits in the window the peer opened.
    func fits(window: Int) -> Bool { outbound.count < window }

    mutating func send(_ buffer: ByteBuffer) { outbound.append(buffer) }
    mutating func endSending() { outbound.ended = true }

    /// More to send or its end: whether libnghttp2 must be told to resume the stream.
    mutating func resumeNeeded() -> Bool {
        guard deferred, open else { return false }
        deferred = false
        return true
    }

    /// libnghttp2 asks for up to `buffer.count` bytes of DATA.
    mutating func read(into buffer: UnsafeMutableRawBufferPointer) -> Read {
        let copied = outbound.read(into: buffer)
        if outbound.isEmpty, outbound.ended { return .bytes(copied, end: true) }
        if copied > 0 { return .bytes(copied, end: false) }
        deferred = true
        return .deferred
    }

    /// DATA arrived: how many of its bytes to consume (reopen the window for) now.
    mutating func received(_ count: Int) -> Int {
        if reading { return count }
        unconsumed += count
        return 0
    }

    /// Reading pauses or resumes: how many bytes to consume now.
    mutating func setReading(_ on: Bool) -> Int {
        guard reading != on else { return 0 }
        reading = on
        guard on else { return 0 }
        defer { unconsumed = 0 }
        return unconsumed
    }

    /// Nothing more is sent (the stream is being reset or closed).
    mutating func cancel() {
        open = false
        outbound.removeAll()
    }

    /// The stream is over: what was received and never consumed, which still
    /// counts against the connection's window.
    mutating func closed() -> Int {
        cancel()
        defer { unconsumed = 0 }
        return unconsumed
    }
}
