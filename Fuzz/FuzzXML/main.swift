// libFuzzer entry: the XML decoder's two readers held to one answer. Whatever
// the hand-written fast path (XMLScanner) accepts, libxml2's reader must
// accept too and decode to the same document, in both namespace modes and
// with forced arrays; what it declines is libxml2's alone. Under ASan, with
// checked indexing in the scanner, no input reads out of bounds.
@testable import Rewriter

let arrays = XMLArrayPaths(["/r/a", "/r/a/b", "/Envelope/Body/r"])

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: start, count: count))
    for namespaces in XMLDecoder.Namespaces.allCases {
        guard let fast = XMLScanner.decode(bytes, namespaces: namespaces, arrays: arrays, maxDepth: 16) else { continue }
        let slow: JSONValue
        do {
            slow = try XMLDecoder.libxml2(bytes, namespaces: namespaces, arrays: arrays, maxDepth: 16)
        } catch {
            preconditionFailure("the fast path accepted what libxml2 refuses (\(namespaces)): \(error)")
        }
        precondition(fast == slow, "the two readers differ (\(namespaces)): \(JSONWriter.string(fast)) vs \(JSONWriter.string(slow))")
    }
    return 0
}
