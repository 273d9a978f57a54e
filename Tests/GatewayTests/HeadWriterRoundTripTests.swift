import NIOCore
import NIOHTTP1
import Rewriter
import Testing
@testable import Gateway

/// The hand-measured head writers, written then read back: a head of every
/// length around each power of two (where ByteBuffer's capacity ends), and
/// random ones. A size measured one byte short traps in the writer (and
/// wrote past the buffer before it checked).
@Suite(.ownThreads) struct HeadWriterRoundTripTests {
    /// A request head of exactly `total` bytes (at least 70).
    static func request(totalBytes total: Int, random: inout SplitMix64) -> (method: String, target: String, headers: HeaderList) {
        let methods = ["GET", "POST", "PATCH", "DELETE"]
        let method = methods[Int(random.next() % UInt64(methods.count))]
        var headers: HeaderList = ["Host": "upstream.test"]
        if random.next() % 2 == 0 { headers.add("X-Forwarded-For", "127.0.0.1") }
        let fixed = method.utf8.count + 14 + headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 }
        let target = "/" + String(repeating: "a", count: max(0, total - fixed - 1))
        return (method, target, headers)
    }

    static func readBack(_ buffer: ByteBuffer) throws -> RequestHead? {
        var decoder = HTTP1RequestDecoder(maxHeadBytes: 1 << 20)
        var buffer = buffer
        guard case .head(let head)? = try decoder.next(&buffer) else { return nil }
        return head
    }

    @Test func requestHeadsOfEveryLengthAroundEachPowerOfTwo() throws {
        var random = SplitMix64(seed: 7)
        for exponent in 7...14 {
            for total in (1 << exponent) - 3...(1 << exponent) + 3 {
                let (method, target, headers) = Self.request(totalBytes: total, random: &random)
                var buffer = ByteBuffer()
                buffer.writeRequestHead(method: method, target: target, headers: headers)
                #expect(buffer.readableBytes == total)
                let head = try #require(try Self.readBack(buffer))
                #expect(head.method.rawValue == method && head.uri == target)
                #expect(head.headers.map(\.name) == headers.map(\.name))
                #expect(head.headers.map(\.value) == headers.map(\.value))
            }
        }
    }

    @Test func statusLinesOfEveryLengthAroundEachPowerOfTwo() {
        for exponent in 5...12 {
            for total in (1 << exponent) - 3...(1 << exponent) + 3 {
                // "HTTP/1.1 200 OK\r\n" is 17 bytes; one field fills the rest.
                let value = String(repeating: "v", count: max(1, total - 17 - 5))
                let headers: HeaderList = ["X": value]
                var buffer = ByteBuffer()
                _ = buffer.writeStatusLine(.ok, headers: headers)
                #expect(String(buffer: buffer) == "HTTP/1.1 200 OK\r\nX: \(value)\r\n")
            }
        }
    }

    @Test func framingFieldsOfEveryLengthReadBack() throws {
        for length in [0, 1, 9, 10, 99, 100, 65_535, 1 << 31, Int(Int32.max) * 4] {
            for total in 125...131 {
                var random = SplitMix64(seed: UInt64(total))
                let (method, target, headers) = Self.request(totalBytes: total, random: &random)
                var buffer = ByteBuffer()
                buffer.writeRequestHead(method: method, target: target, headers: headers, framing: .length(length))
                let head = try #require(try Self.readBack(buffer))
                #expect(head.headers.values("Content-Length") == [String(length)])
            }
        }
        var buffer = ByteBuffer()
        buffer.writeRequestHead(method: "POST", target: "/", headers: ["Host": "h"], framing: .streamed)
        #expect(String(buffer: buffer) == "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n")
    }

    @Test func randomHeadsReadBackEqual() throws {
        var random = SplitMix64(seed: 2026)
        for _ in 0..<2000 {
            var headers: HeaderList = ["Host": "h"]
            for n in 0..<Int(random.next() % 12) {
                headers.add("X-F\(n)", String(repeating: "v", count: Int(random.next() % 300) + 1))
            }
            let target = "/" + String(repeating: "p", count: Int(random.next() % 3000))
            var buffer = ByteBuffer()
            buffer.writeRequestHead(method: "PUT", target: target, headers: headers)
            let head = try #require(try Self.readBack(buffer))
            #expect(head.uri == target && head.headers.map(\.value) == headers.map(\.value))
        }
    }
}
