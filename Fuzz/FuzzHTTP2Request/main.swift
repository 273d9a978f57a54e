// libFuzzer entry: the checks an HTTP/2 request block goes through to
// become a request (fields split from the input at 0x00, name and value at
// 0x01). Accepted or refused, never a trap; an accepted one has a path.
@testable import Gateway

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let input = Array(UnsafeRawBufferPointer(start: start, count: count))
    var builder = HTTP2RequestHeadBuilder()
    for field in input.split(separator: 0x00) {
        let parts = field.split(separator: 0x01, maxSplits: 1, omittingEmptySubsequences: false)
        builder.add(name: String(decoding: parts[0], as: UTF8.self), value: String(decoding: parts.dropFirst().first ?? [], as: UTF8.self))
    }
    if let head = builder.head() {
        precondition(head.uri.utf8.first != nil, "an accepted request without a path")
        _ = try? HTTP1RequestDecoder.contentLength(head.headers)
    }
    return 0
}
