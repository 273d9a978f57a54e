import CNGHTTP2
import NIOCore

/// What an HTTP/2 session reports while it reads the peer's bytes
/// (`receive`) or produces its own (`send`). Called on the connection's
/// event loop, from inside those two calls only: a delegate may submit
/// frames, never call `receive` or `send` itself.
protocol NGHTTP2SessionDelegate: AnyObject {
    /// A frame's header was read, before its payload: false refuses the
    /// frame as a connection error (PROTOCOL_ERROR).
    func frameBegins(type: nghttp2_frame_type, stream: Int32) -> Bool
    /// A header block begins on `stream`.
    func headersBegin(stream: Int32, category: nghttp2_headers_category)
    /// One field of that block, already checked by libnghttp2's HTTP rules
    /// (RFC 9113 §8.2, §8.3). The bytes are valid during the call only.
    func header(stream: Int32, category: nghttp2_headers_category, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)
    /// A whole frame was read (a HEADERS after its last field, a DATA after its bytes).
    func frameReceived(_ frame: HTTP2FrameSummary)
    /// Bytes of a DATA frame. Valid during the call only.
    func dataReceived(stream: Int32, _ bytes: UnsafeRawBufferPointer)
    func streamClosed(stream: Int32, errorCode: UInt32)
    /// Up to `buffer.count` bytes of `stream`'s body copied into `buffer`.
    func readBody(stream: Int32, into buffer: UnsafeMutableRawBufferPointer) -> HTTP2BodyRead
}

/// A stream whose body libnghttp2 takes from a queue (`readBody`).
protocol HTTP2BodySource: AnyObject {
    /// Its queue went out (wholly or in part): it may take more from its call.
    func mayWriteAgain()
}

/// What a frame that arrived says, copied out of libnghttp2's union.
struct HTTP2FrameSummary {
    var type: nghttp2_frame_type
    var stream: Int32
    var flags: UInt8
    var length: Int
    /// HEADERS: request, response, push response or trailers.
    var category: nghttp2_headers_category

    var endStream: Bool { flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0 }
}

/// A data provider's answer.
enum HTTP2BodyRead {
    /// `count` bytes were copied; `end`: the body is over (with trailers to follow when `trailers`).
    case bytes(Int, end: Bool, trailers: Bool)
    /// Nothing yet: the stream waits until `resume` is called.
    case deferred
}

/// One libnghttp2 session (server or client) for one connection: framing,
/// HPACK, stream states, flow control and the flood limits of the reference
/// implementation. Bytes go in with `receive` and come out of `send`; the
/// socket is the channel handler's. Lives on one event loop.
///
/// Memory: this object owns `session` and frees it in deinit. libnghttp2
/// holds `self` as an unretained user-data pointer, valid because the
/// session, the only thing that uses it, dies with `self`. `delegate` is
/// unowned: the channel handler owns this session and outlives it. Pointers
/// libnghttp2 hands to callbacks are read inside the callback only; header
/// fields given to `submit…` are copied by libnghttp2 before it returns.
final class NGHTTP2Session {
    private var session: OpaquePointer!
    unowned let delegate: any NGHTTP2SessionDelegate

    struct Options {
        /// Rapid reset (CVE-2023-44487): libnghttp2's own token bucket; the
        /// server handler also counts resets, below this, to send its own GOAWAY.
        var resetBurst: UInt64 = 1000
        var resetRate: UInt64 = 33
        /// Stream windows are reopened by `consume` as the call reads.
        var manualWindowUpdates = true
    }

    init(server: Bool, delegate: any NGHTTP2SessionDelegate, options: Options = Options()) {
        self.delegate = delegate
        var option: OpaquePointer?
        nghttp2_option_new(&option)
        defer { nghttp2_option_del(option) }
        nghttp2_option_set_no_auto_window_update(option, options.manualWindowUpdates ? 1 : 0)
        nghttp2_option_set_stream_reset_rate_limit(option, options.resetBurst, options.resetRate)
        let user = Unmanaged.passUnretained(self).toOpaque()
        let status = server ? nghttp2_session_server_new2(&session, Self.callbacks, user, option)
            : nghttp2_session_client_new2(&session, Self.callbacks, user, option)
        // Only NGHTTP2_ERR_NOMEM can fail it.
        precondition(status == 0, "nghttp2_session_new: \(status)")
    }

    deinit { nghttp2_session_del(session) }

    /// Inside `receive` or `flush`: libnghttp2 may not be entered again, so
    /// output the delegate causes meanwhile waits for the call to return.
    private(set) var busy = false
    private var flushScheduled = false
    /// The session is over and the channel closing: nothing more is read or sent.
    private(set) var closing = false

    /// Feeds the peer's bytes; returns libnghttp2's result (negative: a
    /// fatal error, the connection must end).
    func receive(_ buffer: ByteBuffer) -> Int {
        busy = true
        defer { busy = false }
        return buffer.withUnsafeReadableBytes { bytes in
            nghttp2_session_mem_recv(session, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
        }
    }

    /// Writes every frame ready to go in one write and flush. When the
    /// session is finished (GOAWAY sent or received and no stream left, or a
    /// fatal error), the channel closes once that is written; returns false then.
    func flush(_ context: ChannelHandlerContext) -> Bool {
        guard !busy, !closing else { return !closing }
        var buffer = context.channel.allocator.buffer(capacity: 0)
        busy = true
        var ok = true
        while true {
            var data: UnsafePointer<UInt8>?
            let count = nghttp2_session_mem_send(session, &data)
            if count <= 0 {
                ok = count == 0
                break
            }
            // Valid until the next mem_send: copied now.
            buffer.writeBytes(UnsafeRawBufferPointer(start: data, count: count))
        }
        busy = false
        if buffer.readableBytes > 0 { context.writeAndFlush(NIOAny(buffer), promise: nil) }
        guard ok, !isFinished else {
            closing = true
            context.eventLoop.assumeIsolated().execute { context.close(promise: nil) }
            return false
        }
        let drained = self.drained
        self.drained = []
        for stream in drained { stream.mayWriteAgain() }
        return true
    }

    /// `flush` at the end of this event-loop tick, once (every stream has
    /// written by then): one write for all of them.
    func flushLater(_ context: ChannelHandlerContext) {
        guard !busy, !flushScheduled else { return }
        flushScheduled = true
        context.eventLoop.assumeIsolated().execute { [self] in
            flushScheduled = false
            _ = flush(context)
        }
    }

    /// Streams whose queued body went out: told once the send is done that they may write again.
    private var drained: [any HTTP2BodySource] = []

    func bodyDrained(_ stream: any HTTP2BodySource) { drained.append(stream) }

    /// Neither side has anything more to say: the connection can close.
    var isFinished: Bool { nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 }

    var lastProcessedStream: Int32 { nghttp2_session_get_last_proc_stream_id(session) }

    func submitSettings(_ settings: [(nghttp2_settings_id, UInt32)]) {
        var entries = settings.map { nghttp2_settings_entry(settings_id: Int32($0.0.rawValue), value: $0.1) }
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entries, entries.count)
    }

    /// The connection's receive window (stream 0) or a stream's.
    func setLocalWindow(stream: Int32, size: Int32) {
        nghttp2_session_set_local_window_size(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream, size)
    }

    /// What may still be sent on `stream` now: the smaller of its window and the connection's.
    func sendWindow(stream: Int32) -> Int {
        Int(max(0, min(nghttp2_session_get_stream_remote_window_size(session, stream), nghttp2_session_get_remote_window_size(session))))
    }

    /// `count` received bytes were read by their call: their windows may reopen.
    func consume(stream: Int32, _ count: Int) {
        guard count > 0 else { return }
        if nghttp2_session_consume(session, stream, count) != 0 { nghttp2_session_consume_connection(session, count) }
    }

    /// Bytes for a stream no call reads (reset, refused): the connection's window still reopens.
    func consumeConnection(_ count: Int) {
        if count > 0 { nghttp2_session_consume_connection(session, count) }
    }

    /// A response's HEADERS; with a body, DATA follows from the delegate's `readBody`.
    func submitResponse(stream: Int32, _ block: HeaderBlock, body: Bool) {
        block.withNameValues { fields, count in
            if body {
                var provider = Self.provider
                _ = nghttp2_submit_response(session, stream, fields, count, &provider)
            } else {
                _ = nghttp2_submit_response(session, stream, fields, count, nil)
            }
        }
    }

    /// A request's HEADERS; with a body, DATA follows from `readBody`.
    /// Returns the new stream's id (negative: refused, as when the peer's GOAWAY came first).
    func submitRequest(_ block: HeaderBlock, body: Bool) -> Int32 {
        block.withNameValues { fields, count in
            if body {
                var provider = Self.provider
                return nghttp2_submit_request(session, nil, fields, count, &provider, nil)
            }
            return nghttp2_submit_request(session, nil, fields, count, nil, nil)
        }
    }

    /// A 1xx response, or trailers (`endStream`).
    func submitHeaders(stream: Int32, _ block: HeaderBlock, endStream: Bool) {
        block.withNameValues { fields, count in
            let flags = endStream ? NGHTTP2_FLAG_END_STREAM : NGHTTP2_FLAG_NONE
            _ = nghttp2_submit_headers(session, UInt8(flags.rawValue), stream, nil, fields, count, nil)
        }
    }

    /// A deferred body has more to send.
    func resume(stream: Int32) { nghttp2_session_resume_data(session, stream) }

    func reset(stream: Int32, code: nghttp2_error_code) {
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream, code.rawValue)
    }

    /// GOAWAY naming `lastStream`; the connection ends once it is sent
    /// (`terminate`) or once the streams up to it are done.
    func goAway(lastStream: Int32, code: nghttp2_error_code, terminate: Bool) {
        if terminate {
            nghttp2_session_terminate_session2(session, lastStream, code.rawValue)
        } else {
            nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), lastStream, code.rawValue, nil, 0)
        }
    }

    /// A graceful shutdown's first step: no new streams, please (RFC 9113 §6.8).
    func shutdownNotice() { nghttp2_submit_shutdown_notice(session) }

    func ping() { nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil) }

    // MARK: libnghttp2's callbacks, shared by every session (libnghttp2 copies them into each).

    /// The session is borrowed, not retained: a callback runs inside one of
    /// its calls into libnghttp2, so it is alive (two atomic operations per
    /// callback otherwise, a dozen callbacks per stream).
    private static func delegate(_ user: UnsafeMutableRawPointer?) -> any NGHTTP2SessionDelegate {
        Unmanaged<NGHTTP2Session>.fromOpaque(user!)._withUnsafeGuaranteedRef { $0.delegate }
    }

    private static var provider: nghttp2_data_provider {
        nghttp2_data_provider(source: nghttp2_data_source(), read_callback: readBody)
    }

    private static let readBody: nghttp2_data_source_read_callback = { _, stream, buffer, length, flags, _, user in
        switch delegate(user).readBody(stream: stream, into: UnsafeMutableRawBufferPointer(start: buffer, count: length)) {
        case .deferred:
            return Int(NGHTTP2_ERR_DEFERRED.rawValue)
        case .bytes(let count, let end, let trailers):
            if end { flags!.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
            if trailers { flags!.pointee |= NGHTTP2_DATA_FLAG_NO_END_STREAM.rawValue }
            return count
        }
    }

    /// Created once for the process and never freed.
    nonisolated(unsafe) private static let callbacks: OpaquePointer = {
        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        nghttp2_session_callbacks_set_on_begin_frame_callback(callbacks) { _, header, user in
            let header = header!.pointee
            let accepted = delegate(user).frameBegins(type: nghttp2_frame_type(UInt32(header.type)), stream: header.stream_id)
            return accepted ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE.rawValue
        }
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, user in
            let frame = frame!.pointee
            delegate(user).headersBegin(stream: frame.hd.stream_id, category: frame.headers.cat)
            return 0
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, nameLength, value, valueLength, _, user in
            let frame = frame!.pointee
            delegate(user).header(stream: frame.hd.stream_id, category: frame.headers.cat,
                                  name: UnsafeRawBufferPointer(start: name, count: nameLength),
                                  value: UnsafeRawBufferPointer(start: value, count: valueLength))
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, user in
            let frame = frame!.pointee
            let type = nghttp2_frame_type(UInt32(frame.hd.type))
            let category = type == NGHTTP2_HEADERS ? frame.headers.cat : NGHTTP2_HCAT_HEADERS
            delegate(user).frameReceived(HTTP2FrameSummary(type: type, stream: frame.hd.stream_id, flags: frame.hd.flags,
                                                           length: frame.hd.length, category: category))
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, stream, data, length, user in
            delegate(user).dataReceived(stream: stream, UnsafeRawBufferPointer(start: data, count: length))
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, stream, code, user in
            delegate(user).streamClosed(stream: stream, errorCode: code)
            return 0
        }
        return callbacks!
    }()
}
