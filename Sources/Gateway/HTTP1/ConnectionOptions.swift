import NIOHTTP1
import Rewriter

/// What the tokens of a message's `Connection` fields say about keeping
/// the connection: `close` ends it, `keep-alive` keeps it, otherwise HTTP/1.1
/// keeps it and HTTP/1.0 does not.
struct ConnectionOptions {
    var close = false
    var keepAlive = false
    /// A token other than those two: it names a field that is hop-by-hop too.
    var namesFields = false

    init() {}

    /// What every `Connection` field of `headers` says, read in place.
    init(fields headers: HeaderList) {
        headers.forEachValue(named: "Connection") { read($0) }
    }

    /// Reads one `Connection` field value (`close, X-Foo`), without the
    /// arrays NIO's `isKeepAlive` builds, over the value's bytes in place
    /// (slicing its UTF8View retained the string at every step).
    mutating func read(_ value: String) {
        // A native string's bytes as they are (every string the data path has is one).
        var value = value
        value.withUTF8 { read(bytes: $0) }
    }

    /// The same over a value's bytes where they were read.
    mutating func read(bytes: UnsafeRawBufferPointer) {
        read(bytes: UnsafeBufferPointer(start: bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), count: bytes.count))
    }

    private mutating func read(bytes: UnsafeBufferPointer<UInt8>) {
        var i = 0
        while i < bytes.count {
            while i < bytes.count, bytes[i] == .space || bytes[i] == .tab { i += 1 }
            let start = i
            while i < bytes.count, bytes[i] != UInt8(ascii: ","), bytes[i] != .space, bytes[i] != .tab { i += 1 }
            let word = UnsafeBufferPointer(rebasing: bytes[start..<i])
            if Self.equalsLowercased(word, "close") {
                close = true
            } else if Self.equalsLowercased(word, "keep-alive") {
                keepAlive = true
            } else if !word.isEmpty {
                namesFields = true
            }
            while i < bytes.count, bytes[i] != UInt8(ascii: ",") { i += 1 }
            i += 1
        }
    }

    private static func equalsLowercased(_ word: UnsafeBufferPointer<UInt8>, _ token: StaticString) -> Bool {
        guard word.count == token.utf8CodeUnitCount else { return false }
        let expected = UnsafeBufferPointer(start: token.utf8Start, count: token.utf8CodeUnitCount)
        return word.indices.allSatisfy { word[$0] | 0x20 == expected[$0] }
    }

    func keepsAlive(version: HTTPVersion) -> Bool {
        !close && (keepAlive || (version.major == 1 && version.minor >= 1))
    }
}
