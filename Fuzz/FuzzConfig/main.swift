// libFuzzer entry: the config loader on any text. Loaded or refused with
// errors naming line and key, never a trap.
import Gateway

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    guard count <= 4096 else { return 0 }
    let yaml = String(decoding: UnsafeRawBufferPointer(start: start, count: count), as: UTF8.self)
    _ = try? ConfigLoader.load(yaml: yaml, file: "fuzz.yaml", environment: ["SECRET": "s"])
    return 0
}
