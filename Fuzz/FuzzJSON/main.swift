// libFuzzer entry: the JSON reader. What it accepts is written and read
// again to the same value; what it refuses is refused with an error.
import Rewriter

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: start, count: count))
    guard let value = try? JSONReader.parse(bytes) else { return 0 }
    let written = JSONWriter.bytes(value)
    guard let again = try? JSONReader.parse(written) else { fatalError("written JSON does not read back") }
    precondition(again == value, "JSON changed in a round trip")
    return 0
}
