import Glibc
import NIOCore
import NIOPosix

extension UpstreamError {
    /// Why a connect failed, as an operator reads it (`connect refused`),
    /// not as NIO's error describes itself (the errno twice, in brackets).
    static func connectReason(_ error: any Error) -> String {
        if case ChannelError.connectTimeout = error { return "connect timed out" }
        var code = (error as? IOError)?.errnoCode
        if let failure = error as? NIOConnectionError {
            if failure.connectionErrors.isEmpty, failure.dnsAError != nil || failure.dnsAAAAError != nil { return "name not resolved" }
            if failure.connectionErrors.contains(where: { if case ChannelError.connectTimeout = $0.error { true } else { false } }) {
                return "connect timed out"
            }
            code = failure.connectionErrors.lazy.compactMap { ($0.error as? IOError)?.errnoCode }.first
        }
        switch code {
        case ECONNREFUSED: return "connect refused"
        case ETIMEDOUT: return "connect timed out"
        case EHOSTUNREACH, ENETUNREACH: return "no route to the host"
        case let code?: return "connect failed: \(String(cString: strerror(code)))"
        case nil: return "connect failed: \(error)"
        }
    }
}
