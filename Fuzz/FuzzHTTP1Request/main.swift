// libFuzzer entry: the HTTP/1.1 request decoder, fed the input in two reads
// split where its first byte says. Every input is read or refused, never a trap.
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
            while try decoder.next(&buffer) != nil {}
        } catch {
            return 0
        }
    }
    return 0
}
