// libFuzzer entry: hostile calls into the Proxy-Wasm host. The input picks
// host functions and their arguments (pointers and lengths near and past
// the end of the filter's memory) and runs them against a live VM of the
// example C filter, interpreted or compiled (the input's first byte picks
// which); every access must be checked, none may crash. A
// serialized map the input spells must survive a round trip, and so must
// the request those calls edited in place, which must stay fit to send.
import CoreMetrics
import Foundation
import Logging
import Rewriter
import WasmKit
@testable import Gateway

let names = (FilterVM.proxyFunctions.keys.map { ("env", $0) } + FilterVM.wasiFunctions.keys.map { ("wasi_snapshot_preview1", $0) })
    .filter { $0.1 != "proxy_http_call" }.sorted { $0.1 < $1.1 }

// libFuzzer calls in on one thread.
nonisolated(unsafe) let vms: [FilterVM] = {
    guard let bytes = FileManager.default.contents(atPath: "config/examples/filters/sign.wasm") else {
        fatalError("run from the repository's root: config/examples/filters/sign.wasm is read")
    }
    var filter = FilterConfig(name: "fuzz", wasm: "sign.wasm", configuration: Array("k".utf8), rootID: "", failOpen: false, fuel: 1_000_000,
                              maxMemory: 4 << 20, environment: [("A", "1")], module: try! FilterModule(bytes: [UInt8](bytes)))
    // What the guest logs is formatted, then dropped: stderr is libFuzzer's.
    var logger = Logger(label: "fuzz")
    logger.logLevel = .critical
    let services = FilterServices(logger: logger, shared: FilterSharedState(factory: NOOPMetricsHandler.instance))
    let interpreted = try! FilterVM.start(filter, services: services)
    do {
        filter.engine = .compiled(library: try FilterCompiler.library(for: [UInt8](bytes)))
    } catch {
        fatalError("the compiled engine needs wasm2c and cc (Debian's wabt and gcc): \(error)")
    }
    return [interpreted, try! FilterVM.start(filter, services: services)]
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let input = Array(UnsafeRawBufferPointer(start: start, count: count))
    if let pairs = ProxyWasm.deserialize(input) {
        let again = ProxyWasm.deserialize(ProxyWasm.serialize(pairs))
        precondition(again.map { $0.map(\.name) == pairs.map(\.name) && $0.map(\.value) == pairs.map(\.value) } == true, "map round trip")
    }
    var request = UpstreamRequest(method: "POST", target: "/a", headers: ["Host": "h", "x": "y"], body: Array("body".utf8))
    let exchange = FilterExchange(taking: &request,
                                  info: FixedCallInfo(route: "r", upstream: "u", requestID: "id", clientAddress: "127.0.0.1",
                                                       localAddress: "127.0.0.1:1", scheme: "http", proto: "HTTP/1.1", startNanos: 0))
    let vm = vms[Int(input.first ?? 0) & 1]
    guard let context = try? vm.open(exchange) else { return 0 }
    defer { vm.close(context, exchange) }
    vm.act(for: context, exchange)
    let size = UInt32(vm.memory?.byteCount ?? 0)
    // 1 byte picks the function, then 8 arguments of 4 bytes; the first byte of each argument says how to read it.
    var offset = 0
    while offset + 33 <= input.count {
        let (module, name) = names[Int(input[offset]) % names.count]
        var values: [Value] = []
        for index in 0..<8 {
            let at = offset + 1 + index * 4
            let raw = UInt32(input[at]) | UInt32(input[at + 1]) << 8 | UInt32(input[at + 2]) << 16 | UInt32(input[at + 3]) << 24
            switch input[at] % 4 {
            case 0: values.append(.i32(raw))                                     // anywhere
            case 1: values.append(.i32(size &- (raw >> 8) % 64))                 // at the very end
            case 2: values.append(.i32((raw >> 8) % max(size, 1)))               // inside
            default: values.append(.i32((raw >> 8) % 64))                        // small: a length, an id
            }
        }
        _ = try? FilterVM.hostFunction(module: module, name: name)!(vm, Arguments(values))
        offset += 33
    }
    // The request as those calls left it: its map is its pseudo-fields and
    // fields, in order, and every field can go on the wire as it is.
    exchange.handBack(to: &request, streams: false)
    let pairs = ProxyWasm.deserialize(FieldMap.request(exchange).serialized)
    var expected = [(":method", request.method), (":path", request.target), (":authority", request.headers["Host"] ?? ""), (":scheme", exchange.scheme)]
    expected += request.headers.map { ($0.name, $0.value) }
    precondition(pairs.map { $0.map(\.name) == expected.map(\.0) && $0.map(\.value) == expected.map(\.1) } == true, "request map round trip")
    precondition(FilterVM.isWritable((":method", request.method)) && FilterVM.isWritable((":path", request.target)), "request line")
    precondition(request.headers.allSatisfy { FilterVM.isWritable(($0.name, $0.value)) }, "request fields")
    precondition(!request.headers.contains("Content-Length") && !request.headers.contains("Transfer-Encoding"), "framing stays the gateway's")
    precondition(request.framing == .length(request.body?.count ?? 0), "framing true to the body")
    return 0
}
