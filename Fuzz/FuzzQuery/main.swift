// libFuzzer entry: query and form decoding, then encoding what was decoded
// with each array style. Decoded or refused, never a trap.
import Rewriter

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: start, count: count))
    _ = PercentEncoding.decode(bytes, plusAsSpace: true)
    guard let object = try? QueryDecoder.decode(bytes) else { return 0 }
    for spaceAsPlus in [false, true] {
        var out: [UInt8] = []
        QueryEncoder(options: QueryOptions(), spaceAsPlus: spaceAsPlus).encode(object, into: &out)
        precondition((try? QueryDecoder.decode(out)) != nil, "an encoded query does not decode")
    }
    return 0
}
