// libFuzzer entry: a request head made from the input (of any length, so
// every power of two is crossed) is written by the hand-measured writer,
// then read back by the decoder: it must come back equal.
import NIOCore
import Rewriter
@testable import Gateway

/// Maps any byte onto a character `allowed` accepts.
func text(_ bytes: some Collection<UInt8>, from alphabet: [UInt8]) -> String {
    String(decoding: bytes.map { alphabet[Int($0) % alphabet.count] }, as: UTF8.self)
}

let token = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~".utf8)
let visible = Array(UInt8(0x21)...UInt8(0x7E))

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let input = Array(UnsafeRawBufferPointer(start: start, count: count))
    // Pieces separated by 0xFF: method, target, then field names and values in turn.
    let pieces = input.split(separator: 0xFF, omittingEmptySubsequences: false)
    let method = text(pieces.first?.prefix(16) ?? [], from: Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8))
    guard !method.isEmpty else { return 0 }
    let target = "/" + text(pieces.dropFirst().first ?? [], from: visible)
    var headers: HeaderList = ["Host": "upstream.test"]
    var rest = pieces.dropFirst(2)
    while let name = rest.popFirst() {
        let value = rest.popFirst() ?? []
        headers.add("x-" + text(name, from: token), text(value, from: visible))
    }
    // The last byte picks the framing field: none, chunked, or a length made of the first bytes.
    let framing: RequestFraming = switch input.last.map({ $0 % 3 }) {
    case 1: .streamed
    case 2: .length(input.prefix(4).reduce(0) { $0 << 8 | Int($1) })
    default: .none
    }
    var buffer = ByteBuffer()
    buffer.writeRequestHead(method: method, target: target, headers: headers, framing: framing)
    var decoder = HTTP1RequestDecoder(maxHeadBytes: 1 << 24)
    guard case .head(let head)? = try? decoder.next(&buffer) else { fatalError("a written head did not read back") }
    precondition(head.method.rawValue == method && head.uri == target, "request line changed")
    var read = head.headers
    switch framing {
    case .none: break
    case .streamed: precondition(read.values("Transfer-Encoding") == ["chunked"], "chunked framing lost")
    case .length(let length): precondition(read.values("Content-Length") == [String(length)], "length framing lost")
    }
    read.remove("Transfer-Encoding")
    read.remove("Content-Length")
    precondition(read.map(\.name) == headers.map(\.name) && read.map(\.value) == headers.map(\.value), "fields changed")
    precondition(buffer.readableBytes == 0, "bytes left after the head")
    return 0
}
