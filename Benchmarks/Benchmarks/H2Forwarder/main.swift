import CNGHTTP2Bench
import NIOCore
import NIOHTTP1
import NIOPosix

// The h2c floor under any proxy built on SwiftNIO and libnghttp2, for
// scripts/bench: h2c from clients through libnghttp2's server session
// (framing, HPACK, flow control), each stream sent upstream as an HTTP/1.1
// request on a kept-alive connection of its client connection (NIO's
// HTTP/1.1 codec), the answer back when whole. No routing, no header
// rules, no log; request bodies are not sent (the bench's calls are GETs).
// Usage: H2Forwarder LISTEN_PORT UPSTREAM_PORT [LOOPS]

/// One client connection: its libnghttp2 session and its upstream connections.
final class Frontend: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer

    struct Request {
        var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/")
    }

    let upstreamPort: Int
    var session: OpaquePointer!
    var context: ChannelHandlerContext!
    var requests: [Int32: Request] = [:]
    /// Answers being sent, read by libnghttp2's data provider.
    var bodies: [Int32: ByteBuffer] = [:]
    var idle: [Upstream] = []
    var sendScheduled = false

    init(upstreamPort: Int) { self.upstreamPort = upstreamPort }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        nghttp2_session_server_new(&session, Self.callbacks, Unmanaged.passUnretained(self).toOpaque())
        var setting = nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: 100)
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &setting, 1)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        nghttp2_session_del(session)
        session = nil
        for upstream in idle { upstream.channel?.close(promise: nil) }
    }

    func channelActive(context: ChannelHandlerContext) { send() }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        let read = buffer.withUnsafeReadableBytes { nghttp2_session_mem_recv(session, $0.baseAddress?.assumingMemoryBound(to: UInt8.self), $0.count) }
        if read < 0 { return context.close(promise: nil) }
    }

    func channelReadComplete(context: ChannelHandlerContext) { send() }

    /// Every frame libnghttp2 has ready, in one write.
    func send() {
        guard session != nil else { return }
        var out = context.channel.allocator.buffer(capacity: 0)
        while true {
            var data: UnsafePointer<UInt8>?
            let count = nghttp2_session_mem_send(session, &data)
            if count <= 0 { break }
            out.writeBytes(UnsafeRawBufferPointer(start: data, count: count))
        }
        if out.readableBytes > 0 { context.writeAndFlush(NIOAny(out), promise: nil) }
        if nghttp2_session_want_read(session) == 0, nghttp2_session_want_write(session) == 0 { context.close(promise: nil) }
    }

    /// A request whose headers (and end) arrived: sent on an idle upstream connection, or a new one.
    func forward(_ stream: Int32) {
        guard let request = requests.removeValue(forKey: stream) else { return }
        if let upstream = idle.popLast() { return upstream.send(request.head, stream: stream) }
        let upstream = Upstream(owner: self)
        ClientBootstrap(group: context.eventLoop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(upstream)
                }
            }
            .connect(host: "127.0.0.1", port: upstreamPort)
            .whenComplete { result in
                guard case .success = result else { return self.respond(stream, status: 502, headers: [:], body: nil) }
                upstream.send(request.head, stream: stream)
            }
    }

    /// The upstream's answer to `stream`, its hop-by-hop fields dropped.
    func respond(_ stream: Int32, status: Int, headers: HTTPHeaders, body: ByteBuffer?) {
        guard session != nil else { return }
        var fields: [(String, String)] = [(":status", String(status))]
        for (name, value) in headers where !Self.hopByHop.contains(name.lowercased()) { fields.append((name.lowercased(), value)) }
        var storage: [UInt8] = []
        for (name, value) in fields { storage += name.utf8; storage += value.utf8 }
        bodies[stream] = body ?? ByteBuffer()
        storage.withUnsafeMutableBufferPointer { bytes in
            var nva: [nghttp2_nv] = []
            var offset = 0
            for (name, value) in fields {
                let (n, v) = (name.utf8.count, value.utf8.count)
                nva.append(nghttp2_nv(name: bytes.baseAddress! + offset, value: bytes.baseAddress! + offset + n, namelen: n, valuelen: v,
                                      flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)))
                offset += n + v
            }
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: Self.readBody)
            _ = nghttp2_submit_response(session, stream, nva, nva.count, &provider)
        }
        // The answers of one event-loop tick go out in one write.
        guard !sendScheduled else { return }
        sendScheduled = true
        context.eventLoop.execute {
            self.sendScheduled = false
            self.send()
        }
    }

    static let hopByHop: Set<String> = ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te"]

    static func frontend(_ user: UnsafeMutableRawPointer?) -> Frontend { Unmanaged<Frontend>.fromOpaque(user!).takeUnretainedValue() }

    static let readBody: nghttp2_data_source_read_callback = { _, stream, buffer, length, flags, _, user in
        let frontend = frontend(user)
        guard var body = frontend.bodies[stream] else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
        let count = min(length, body.readableBytes)
        body.withUnsafeReadableBytes { UnsafeMutableRawPointer(buffer!).copyMemory(from: $0.baseAddress!, byteCount: count) }
        body.moveReaderIndex(forwardBy: count)
        if body.readableBytes == 0 {
            flags!.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            frontend.bodies[stream] = nil
        } else {
            frontend.bodies[stream] = body
        }
        return count
    }

    // Read-only once made: libnghttp2 copies it into each session.
    nonisolated(unsafe) static let callbacks: OpaquePointer = {
        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, user in
            let frame = frame!.pointee
            if frame.hd.type == UInt8(NGHTTP2_HEADERS.rawValue), frame.headers.cat == NGHTTP2_HCAT_REQUEST {
                frontend(user).requests[frame.hd.stream_id] = Request()
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, nameLength, value, valueLength, _, user in
            let stream = frame!.pointee.hd.stream_id
            let frontend = frontend(user)
            guard frontend.requests[stream] != nil else { return 0 }
            let name = String(decoding: UnsafeBufferPointer(start: name, count: nameLength), as: UTF8.self)
            let value = String(decoding: UnsafeBufferPointer(start: value, count: valueLength), as: UTF8.self)
            switch name {
            case ":method": frontend.requests[stream]!.head.method = HTTPMethod(rawValue: value)
            case ":path": frontend.requests[stream]!.head.uri = value
            case ":authority": frontend.requests[stream]!.head.headers.add(name: "host", value: value)
            case ":scheme": break
            default: frontend.requests[stream]!.head.headers.add(name: name, value: value)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, user in
            let hd = frame!.pointee.hd
            let isRequest = hd.type == UInt8(NGHTTP2_HEADERS.rawValue) || hd.type == UInt8(NGHTTP2_DATA.rawValue)
            if isRequest, hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0 { frontend(user).forward(hd.stream_id) }
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, stream, _, user in
            let frontend = frontend(user)
            frontend.requests[stream] = nil
            frontend.bodies[stream] = nil
            return 0
        }
        return callbacks!
    }()
}

/// One kept-alive HTTP/1.1 connection upstream, one request at a time.
final class Upstream: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    let owner: Frontend
    var channel: Channel?
    /// The stream it answers; 0 when idle.
    var stream: Int32 = 0
    var head: HTTPResponseHead?
    var body: ByteBuffer?

    init(owner: Frontend) { self.owner = owner }

    func handlerAdded(context: ChannelHandlerContext) { channel = context.channel }

    func send(_ request: HTTPRequestHead, stream: Int32) {
        self.stream = stream
        channel?.write(HTTPClientRequestPart.head(request), promise: nil)
        channel?.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = nil
        case .body(var part):
            if body == nil { body = part } else { body!.writeBuffer(&part) }
        case .end:
            guard let head else { return }
            owner.respond(stream, status: Int(head.status.code), headers: head.headers, body: body)
            (self.head, stream) = (nil, 0)
            owner.idle.append(self)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        owner.idle.removeAll { $0 === self }
        if stream != 0 { owner.respond(stream, status: 502, headers: [:], body: nil) }
    }
}

let arguments = CommandLine.arguments
guard (3...4).contains(arguments.count), let listenPort = Int(arguments[1]), let upstreamPort = Int(arguments[2]),
      let loops = arguments.count == 4 ? Int(arguments[3]) : 1 else {
    fatalError("usage: H2Forwarder LISTEN_PORT UPSTREAM_PORT [LOOPS]")
}
let group = MultiThreadedEventLoopGroup(numberOfThreads: loops)
let server = try ServerBootstrap(group: group)
    .serverChannelOption(.backlog, value: 1024)
    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
    .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
    .childChannelInitializer { client in
        client.eventLoop.makeCompletedFuture { try client.pipeline.syncOperations.addHandler(Frontend(upstreamPort: upstreamPort)) }
    }
    .bind(host: "127.0.0.1", port: listenPort).wait()
try server.closeFuture.wait()
