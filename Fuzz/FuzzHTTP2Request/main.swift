// libFuzzer entry: the checks an HTTP/2 request block goes through to
// become a request (fields split from the input at 0x00, name and value at
// 0x01; names made ASCII, as NIOHPACK requires of what it decodes).
// Accepted or refused, never a trap; an accepted one has a path.
import NIOHPACK
@testable import Gateway

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let input = Array(UnsafeRawBufferPointer(start: start, count: count))
    guard let flags = input.first else { return 0 }
    var block = HPACKHeaders()
    for field in input.dropFirst().split(separator: 0x00) {
        let parts = field.split(separator: 0x01, maxSplits: 1, omittingEmptySubsequences: false)
        block.add(name: String(decoding: parts[0].map { $0 & 0x7F }, as: UTF8.self), value: String(decoding: parts.dropFirst().first ?? [], as: UTF8.self))
    }
    if let head = RequestHead(http2: block, endStream: flags & 1 == 1) {
        precondition(head.uri.utf8.first != nil, "an accepted request without a path")
        _ = try? HTTP1RequestDecoder.contentLength(head.headers)
    }
    return 0
}
