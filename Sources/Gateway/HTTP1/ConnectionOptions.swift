import NIOHTTP1
import Rewriter

/// What the tokens of a message's `Connection` fields say about keeping
/// the connection: `close` ends it, `keep-alive` keeps it, otherwise HTTP/1.1
/// keeps it and HTTP/1.0 does not.
struct ConnectionOptions {
    var close = false
    var keepAlive = false

    /// Reads one `Connection` field value (`close, X-Foo`), without the
    /// arrays NIO's `isKeepAlive` builds.
    mutating func read(_ value: String) {
        var token = value.utf8[...]
        while !token.isEmpty {
            let end = token.firstIndex(of: UInt8(ascii: ",")) ?? token.endIndex
            let word = token[..<end].drop { $0 == .space || $0 == .tab }
            let trimmed = word.prefix { $0 != .space && $0 != .tab }
            if trimmed.elementsEqual("close".utf8, by: { $0 | 0x20 == $1 }) { close = true }
            if trimmed.elementsEqual("keep-alive".utf8, by: { $0 | 0x20 == $1 }) { keepAlive = true }
            token = end == token.endIndex ? token[end...] : token[token.index(after: end)...]
        }
    }

    func keepsAlive(version: HTTPVersion) -> Bool {
        !close && (keepAlive || (version.major == 1 && version.minor >= 1))
    }
}
