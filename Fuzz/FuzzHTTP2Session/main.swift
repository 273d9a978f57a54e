// libFuzzer entry: a client's bytes after the connection preface, through
// the listener's libnghttp2 session and its streams (header callbacks,
// DATA copied in, response bodies copied out by the data provider), on an
// echo route, fed in two reads split where the first byte says. Whatever
// arrives, the handler answers or closes, never traps.
import CoreMetrics
import Logging
import NIOCore
import NIOEmbedded
@testable import Gateway

let context: ListenerContext = {
    let config = try! ConfigLoader.load(yaml: """
        listeners: [{address: 127.0.0.1:0, protocols: [h2c]}]
        limits: {max_header_bytes: 2048}
        routes: [{name: echo, upstream: echo}]
        """).config
    let loop = EmbeddedEventLoop()
    return ListenerContext(config: config, router: Router(config: config), pools: try! UpstreamPools(group: loop, upstreams: config.upstreams),
                           modifiers: [], validators: [], accessLog: nil, logger: Logger(label: "fuzz"),
                           metrics: GatewayMetrics(factory: NOOPMetricsHandler.instance), tls: nil)
}()
let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let input = UnsafeRawBufferPointer(start: start, count: count)
    guard let first = input.first else { return 0 }
    let data = input.dropFirst()
    let cut = Int(first) % (data.count + 1)
    let channel = EmbeddedChannel(handler: HTTP2ServerHandler(slot: ListenerSlot(context)))
    defer { _ = try? channel.finish() }
    _ = try? channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
    for chunk in [preface[...], Array(data.prefix(cut))[...], Array(data.dropFirst(cut))[...]] where channel.isActive {
        _ = try? channel.writeInbound(ByteBuffer(bytes: chunk))
        channel.embeddedEventLoop.run()
        while (try? channel.readOutbound(as: ByteBuffer.self)) ?? nil != nil {}
    }
    return 0
}
