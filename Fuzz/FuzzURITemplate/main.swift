// libFuzzer entry: RFC 6570 templates parsed from the input and expanded
// with strings, lists and maps. Parsed or refused, never a trap.
import Rewriter

let variables = JSONObject([
    "var": "value", "hello": "Hello World!", "list": .array(["red", "green"]),
    "keys": .object(JSONObject(["semi": ";", "dot": "."])), "empty": "",
])

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let source = String(decoding: UnsafeRawBufferPointer(start: start, count: count), as: UTF8.self)
    guard let template = try? URITemplate(source) else { return 0 }
    _ = template.expand(variables)
    return 0
}
