import NIOHTTP1
import Rewriter

extension HTTPHeaders {
    /// NIO's `isKeepAlive` without the arrays it builds for headers it did
    /// not parse itself: `Connection: close` ends the connection,
    /// `keep-alive` keeps it, otherwise HTTP/1.1 keeps it and HTTP/1.0 does not.
    func keepAlive(version: HTTPVersion) -> Bool {
        var keep: Bool?
        for (name, value) in self where HeaderList.equalNames(name, "Connection") {
            var token = value.utf8[...]
            while !token.isEmpty {
                let end = token.firstIndex(of: UInt8(ascii: ",")) ?? token.endIndex
                let word = token[..<end].drop { $0 == .space || $0 == .tab }
                let trimmed = word.prefix { $0 != .space && $0 != .tab }
                if trimmed.elementsEqual("close".utf8, by: { $0 | 0x20 == $1 }) { return false }
                if trimmed.elementsEqual("keep-alive".utf8, by: { $0 | 0x20 == $1 }) { keep = true }
                token = end == token.endIndex ? token[end...] : token[token.index(after: end)...]
            }
        }
        return keep ?? (version.major == 1 && version.minor >= 1)
    }
}

extension HTTPRequestHead {
    var keepsAlive: Bool { headers.keepAlive(version: version) }
}

extension HTTPResponseHead {
    var keepsAlive: Bool { headers.keepAlive(version: version) }
}
