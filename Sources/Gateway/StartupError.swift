/// The gateway cannot serve a config it was given (at start or on reload):
/// an address in use, a certificate that does not load, an upstream whose
/// TLS cannot be set up. Thrown by the listeners and the upstream pools alike.
public struct StartupError: Error, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}
