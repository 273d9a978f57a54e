/// Why bytes could not be read as an HTTP/1.1 message. The text names what
/// was wrong: it goes into the problem answer (client side) or the 502's
/// detail (upstream side).
enum HTTP1ParseError: Error, Equatable, CustomStringConvertible {
    /// Not HTTP/1.1 as RFC 9112 writes it, or ambiguous framing (400).
    case malformed(String)
    /// The head did not end within the limit (431).
    case headTooLarge(limit: Int)
    /// A transfer coding other than chunked (501, as nginx answers it).
    case unsupportedTransferCoding(String)
    /// Not HTTP/1.x (505).
    case unsupportedVersion(String)

    var description: String {
        switch self {
        case .malformed(let what): what
        case .headTooLarge(let limit): "the message head exceeds \(limit) bytes"
        case .unsupportedTransferCoding(let coding): "transfer coding \"\(coding)\" is not supported (only chunked)"
        case .unsupportedVersion(let version): "\(version) is not supported (only HTTP/1.0 and HTTP/1.1)"
        }
    }
}
