// libFuzzer entry: the HTTP/1.1 response decoder (after a GET, or a HEAD when
// the first byte is odd), fed in two reads. Read or refused, never a trap;
// a head read goes out, edited as forwarding edits it, from its received
// bytes exactly as from its fields read into a list.
import NIOCore
import NIOHTTP1
@testable import Gateway

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let input = UnsafeRawBufferPointer(start: start, count: count)
    guard let first = input.first else { return 0 }
    let data = input.dropFirst()
    let cut = Int(first >> 1) % (data.count + 1)
    var decoder = HTTP1ResponseDecoder(maxHeadBytes: 2048)
    decoder.expect(method: first & 1 == 1 ? .HEAD : .GET)
    var buffer = ByteBuffer()
    for chunk in [data.prefix(cut), data.dropFirst(cut)] {
        buffer.writeBytes(chunk)
        do {
            while let part = try decoder.next(&buffer) {
                if case .head(let head) = part { checkForwarded(head, edits: first) }
            }
        } catch {
            return 0
        }
    }
    return 0
}

/// The forwarding's edits (which ones: bits of `edits`) made to the head as
/// received and to a copy read into a list: both write the same bytes.
func checkForwarded(_ head: ResponseHead, edits: UInt8) {
    var received = head
    var list = ResponseHead(version: head.version, status: head.status, headers: head.headers)
    for edit in 0..<4 where edits & (2 << edit) != 0 {
        switch edit {
        case 0:
            received.removeHopByHop()
            list.removeHopByHop()
        case 1:
            received.set("X-Request-Id", "id")
            list.set("X-Request-Id", "id")
        case 2:
            received.set("Content-Type", "text/plain")
            list.set("Content-Type", "text/plain")
        default:
            received.set("Connection", "close")
            list.set("Connection", "close")
        }
    }
    var a = ByteBuffer(), b = ByteBuffer()
    let hasA = a.writeStatusLine(received), hasB = b.writeStatusLine(list)
    precondition(a == b && hasA == hasB && received.headers == list.headers, "received fields went out unlike their list")
}
