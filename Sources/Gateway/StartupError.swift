import Foundation
import NIOCore

/// The gateway cannot serve a config it was given (at start or on reload):
/// an address in use, a certificate that does not load, an upstream whose
/// TLS cannot be set up. Thrown by the listeners and the upstream pools alike.
public struct StartupError: Error, CustomStringConvertible {
    /// What cannot be served, as an operator would say it.
    public let message: String
    /// The message.
    public var description: String { message }

    /// A socket that cannot be bound, said as an operator would: what is wrong with the address.
    static func cannotListen(_ what: String, on address: SocketAddressSpec, _ error: any Error) -> StartupError {
        let reason = switch (error as? IOError)?.errnoCode {
        case EADDRINUSE: "\(address) is already in use (another process listens there)"
        case EACCES: "permission denied for \(address) (ports below 1024 need root or CAP_NET_BIND_SERVICE)"
        case EADDRNOTAVAIL: "\(address.host) is not an address of this machine"
        default: "cannot listen on \(address): \(error)"
        }
        return StartupError(message: what.isEmpty ? reason : "\(what): \(reason)")
    }
}
