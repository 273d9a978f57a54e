/// A Redis reply (RESP2), as hiredis's reader decodes it.
enum RedisValue: Sendable, Equatable {
    case string([UInt8])
    case status(String)
    /// The server refused the command: `NOSCRIPT ...`, `WRONGPASS ...`.
    case error(String)
    case integer(Int64)
    case array([RedisValue])
    case null

    var isError: Bool { if case .error = self { true } else { false } }

    var integer: Int64? {
        switch self {
        case .integer(let value): value
        case .string(let bytes): Int64(String(decoding: bytes, as: UTF8.self))
        default: nil
        }
    }
}
