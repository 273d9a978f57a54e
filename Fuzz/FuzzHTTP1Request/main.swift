// libFuzzer entry: the HTTP/1.1 request decoder, fed the input in two reads
// split where its first byte says. Every input is read or refused, never a
// trap, and what the decoder notes of a head agrees with the head's fields.
import NIOCore
@testable import Gateway

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let input = UnsafeRawBufferPointer(start: start, count: count)
    guard let first = input.first else { return 0 }
    let data = input.dropFirst()
    let cut = Int(first) % (data.count + 1)
    var decoder = HTTP1RequestDecoder(maxHeadBytes: 2048)
    var buffer = ByteBuffer()
    for chunk in [data.prefix(cut), data.dropFirst(cut)] {
        buffer.writeBytes(chunk)
        do {
            while let part = try decoder.next(&buffer) {
                if case .head(let head) = part { check(decoder.lastHead, against: head) }
            }
        } catch {
            return 0
        }
    }
    return 0
}

/// The notes the connection acts on, against what the head's fields say when read as a list.
func check(_ notes: HTTP1RequestDecoder.HeadFacts, against head: RequestHead) {
    let length = (try? HTTP1RequestDecoder.contentLength(head.headers)) ?? nil
    let framing: RequestFraming = head.headers.contains("Transfer-Encoding") ? .streamed : length.map { .length($0) } ?? .none
    precondition(notes.framing == framing, "framing noted \(notes.framing), the fields say \(framing)")
    precondition(notes.keepsAlive == head.keepsAlive, "keep-alive noted \(notes.keepsAlive)")
    precondition(notes.isHEAD == (head.method == .HEAD) && notes.isHTTP10 == (head.version.minor == 0), "method or version noted wrong")
}
