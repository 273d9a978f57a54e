import NIOCore

/// A pass-through route's request body as a machine of its own, embedded in
/// the call's: it outlives a call answered early, whose rest is read and dropped.
extension CallStateMachine {
    /// A pass-through route's request body, streamed as it arrives.
    enum RequestBody: Sendable {
        /// Nothing streams: the body is read whole before its call, or ended.
        case idle
        /// Parts read before the try's connection was ready (`ended`: all of it).
        case waiting([ByteBuffer], ended: Bool)
        /// Each part goes to the try's connection as it arrives.
        case connected
        /// Its call is over: the rest is read and dropped.
        case dropping
    }
}

extension CallStateMachine.RequestBody {
    /// A try's connection arrived: the parts read meanwhile go with its head (nil: nothing streams).
    mutating func connect() -> CallStateMachine.StreamedStart? {
        switch self {
        case .idle, .dropping:
            return nil
        case .connected:
            return CallStateMachine.StreamedStart(pending: [], end: false)
        case .waiting(let pending, let ended):
            self = ended ? .idle : .connected
            return CallStateMachine.StreamedStart(pending: pending, end: ended)
        }
    }

    /// A part of the client's body; `inFlight`: its call is.
    mutating func part(_ buffer: ByteBuffer, inFlight: Bool) -> CallStateMachine.Action {
        switch self {
        case .idle: return .bufferBody(buffer)
        case .connected: return inFlight ? .sendBody(buffer) : .none
        case .dropping: return .none
        case .waiting(var pending, let ended):
            guard inFlight else { return .none }
            // The enum lets go of the array first, so it grows in place.
            self = .idle
            pending.append(buffer)
            self = .waiting(pending, ended: ended)
            return .none
        }
    }

    mutating func ended(inFlight: Bool) -> CallStateMachine.Action {
        switch self {
        case .idle:
            return .none
        case .connected:
            self = .idle
            return inFlight ? .sendEnd : .resumeClient
        case .dropping:
            self = .idle
            return .resumeClient
        case .waiting(let pending, _):
            guard inFlight else {
                self = .idle
                return .resumeClient
            }
            self = .waiting(pending, ended: true)
            return .none
        }
    }

    /// The try's connection can take more: a paused body is read again.
    var resumesOnWritable: CallStateMachine.Action {
        if case .connected = self { return .resumeClient }
        return .none
    }

    /// Its call is over: the rest is read and dropped, unless the client is gone.
    mutating func callEnded(clientGone: Bool) -> CallStateMachine.Action {
        switch self {
        case .idle:
            return .none
        case _ where clientGone:
            self = .idle
            return .none
        case .waiting(_, let ended):
            self = ended ? .idle : .dropping
            return .resumeClient
        case .connected, .dropping:
            self = .dropping
            return .resumeClient
        }
    }
}
