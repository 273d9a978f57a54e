// libFuzzer entry: an access line of text values made from the input is
// written into memory measured for it (AccessLine.room), in each format;
// the JSON one must parse back to the same values, and every format must
// end with its only newline.
import Foundation
import NIOCore
@testable import Gateway

let names: [StaticString] = ["client", "method", "target", "route", "upstream", "request_id", "user_agent", "reason"]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let input = Array(UnsafeRawBufferPointer(start: start, count: count))
    // Pieces separated by 0xFF, one per field; any bytes (invalid UTF-8 is repaired by String).
    let texts = input.split(separator: 0xFF, omittingEmptySubsequences: false).prefix(names.count).map {
        String(decoding: $0, as: UTF8.self)
    }
    for format in [AccessLine.Format.json, .logfmt, .text] {
        var clock = AccessLine.Clock()
        var buffer = ByteBuffer()
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: AccessLine.room(textBytes: texts.reduce(0) { $0 + $1.utf8.count })) {
            var line = AccessLine(format, into: $0, clock: &clock)
            for (name, text) in zip(names, texts) { line.field(name, text) }
            line.field("status", Int(input.count) - 500)
            line.field("duration_ms", millis: Int64(input.count) * 1_000_003)
            line.field("upstream_status", Int?.none)
            return line.finish()
        }
        let bytes = Array(buffer.readableBytesView)
        precondition(bytes.last == UInt8(ascii: "\n") && bytes.filter { $0 == UInt8(ascii: "\n") }.count == 1, "not one line")
        guard format == .json else { continue }
        guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else { fatalError("JSON line did not parse") }
        for (name, text) in zip(names, texts) {
            precondition(object["\(name)"] as? String == text, "\(name) changed")
        }
    }
    return 0
}
