// libFuzzer entry: the HTTP/1.1 response decoder (after a GET, or a HEAD when
// the first byte is odd), fed in two reads. Read or refused, never a trap.
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
            while try decoder.next(&buffer) != nil {}
        } catch {
            return 0
        }
    }
    return 0
}
