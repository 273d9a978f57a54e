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

    /// An integer reply read as a count or a time: the store is untrusted, so
    /// a negative is 0 and anything past 2^40 saturates there; no sum or
    /// product of a few of them can overflow.
    var count: Int? { integer.map { Int(Swift.min(Swift.max($0, 0), Self.maxCount)) } }

    static let maxCount: Int64 = 1 << 40
}
