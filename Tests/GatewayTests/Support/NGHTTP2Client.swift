import CNGHTTP2
import Foundation

/// An HTTP/2 client built on libnghttp2's session API over a blocking
/// loopback socket: valid requests through `submit`, and raw (possibly
/// malformed) frames through `sendRaw`; what the server answers is parsed by
/// libnghttp2, so GOAWAY and RST_STREAM codes come from an independent peer.
final class NGHTTP2Client {
    struct Response {
        var status: String?
        var headers: [(String, String)] = []
        var body: [UInt8] = []
        var resetCode: UInt32?
        var closed = false
    }

    private var session: OpaquePointer?
    private let socket: Int32
    private var outbound: [UInt8] = []
    private(set) var responses: [Int32: Response] = [:]
    /// The first GOAWAY's error code.
    private(set) var goAwayCode: UInt32?
    private(set) var connectionClosed = false
    /// Every frame the server sent, read off the wire independently of the
    /// session (which ignores frames on streams it did not open itself).
    private(set) var rawFrames: [(type: UInt8, stream: UInt32, errorCode: UInt32?, flags: UInt8, length: Int)] = []
    /// Each stream's DATA payloads, as read off the wire.
    private(set) var rawData: [UInt32: [UInt8]] = [:]
    /// The last-stream-id of each GOAWAY, as read off the wire.
    private(set) var goAwayLastStreamIDs: [UInt32] = []
    private var rawBuffer: [UInt8] = []

    /// `initialWindowSize`: SETTINGS_INITIAL_WINDOW_SIZE to announce (how much
    /// of each answer the gateway may send before this client opens the window).
    init(port: Int, initialWindowSize: UInt32? = nil) throws {
        guard let socket = loopbackConnection(port: port) else { throw POSIXError(.ECONNREFUSED) }
        self.socket = socket
        var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))

        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_send_callback(callbacks) { _, data, length, _, user in
            Unmanaged<NGHTTP2Client>.fromOpaque(user!).takeUnretainedValue().outbound.append(contentsOf: UnsafeBufferPointer(start: data, count: length))
            return length
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, nameLength, value, valueLength, _, user in
            let client = Unmanaged<NGHTTP2Client>.fromOpaque(user!).takeUnretainedValue()
            let stream = frame!.pointee.hd.stream_id
            let n = String(decoding: UnsafeBufferPointer(start: name, count: nameLength), as: UTF8.self)
            let v = String(decoding: UnsafeBufferPointer(start: value, count: valueLength), as: UTF8.self)
            if n == ":status" { client.responses[stream, default: Response()].status = v } else {
                client.responses[stream, default: Response()].headers.append((n, v))
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, stream, data, length, user in
            Unmanaged<NGHTTP2Client>.fromOpaque(user!).takeUnretainedValue()
                .responses[stream, default: Response()].body.append(contentsOf: UnsafeBufferPointer(start: data, count: length))
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, user in
            let client = Unmanaged<NGHTTP2Client>.fromOpaque(user!).takeUnretainedValue()
            switch Int(frame!.pointee.hd.type) {
            case Int(NGHTTP2_GOAWAY.rawValue): client.goAwayCode = client.goAwayCode ?? frame!.pointee.goaway.error_code
            case Int(NGHTTP2_RST_STREAM.rawValue):
                client.responses[frame!.pointee.hd.stream_id, default: Response()].resetCode = frame!.pointee.rst_stream.error_code
            default: break
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, stream, _, user in
            Unmanaged<NGHTTP2Client>.fromOpaque(user!).takeUnretainedValue().responses[stream, default: Response()].closed = true
            return 0
        }
        nghttp2_session_client_new(&session, callbacks, Unmanaged.passUnretained(self).toOpaque())
        var settings = initialWindowSize.map { [nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: $0)] } ?? []
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
    }

    deinit {
        nghttp2_session_del(session)
        close(socket)
    }

    /// Queues a request; returns its stream id.
    func submit(method: String, path: String, authority: String = "localhost", headers: [(String, String)] = []) -> Int32 {
        let all = [(":method", method), (":path", path), (":scheme", "http"), (":authority", authority)] + headers
        let cStrings: [(UnsafeMutablePointer<UInt8>, Int, UnsafeMutablePointer<UInt8>, Int)] = all.map { name, value in
            let n = UnsafeMutablePointer<UInt8>.allocate(capacity: name.utf8.count)
            n.initialize(from: Array(name.utf8), count: name.utf8.count)
            let v = UnsafeMutablePointer<UInt8>.allocate(capacity: value.utf8.count)
            v.initialize(from: Array(value.utf8), count: value.utf8.count)
            return (n, name.utf8.count, v, value.utf8.count)
        }
        defer { for c in cStrings { c.0.deallocate(); c.2.deallocate() } }
        var nvs = cStrings.map { nghttp2_nv(name: $0.0, value: $0.2, namelen: $0.1, valuelen: $0.3, flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)) }
        return nghttp2_submit_request(session, nil, &nvs, nvs.count, nil, nil)
    }

    /// HPACK-encodes a header block the way a client would, without any checks.
    func encodeHeaderBlock(_ headers: [(String, String)]) -> [UInt8] {
        var deflater: OpaquePointer?
        nghttp2_hd_deflate_new(&deflater, 4096)
        defer { nghttp2_hd_deflate_del(deflater) }
        var storage = headers.map { (Array($0.0.utf8), Array($0.1.utf8)) }
        var out = [UInt8](repeating: 0, count: 4096)
        let written = storage.withUnsafeMutableBufferPointer { pairs -> Int in
            var nvs = pairs.indices.map { i in
                pairs[i].0.withUnsafeMutableBufferPointer { n in
                    pairs[i].1.withUnsafeMutableBufferPointer { v in
                        nghttp2_nv(name: n.baseAddress, value: v.baseAddress, namelen: n.count, valuelen: v.count,
                                   flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
                    }
                }
            }
            return nghttp2_hd_deflate_hd(deflater, &out, out.count, &nvs, nvs.count)
        }
        return Array(out.prefix(max(0, written)))
    }

    /// The session's own preface and settings, then raw bytes as given.
    func sendRaw(_ bytes: [UInt8]) {
        flush()
        write(bytes)
    }

    static func frame(type: UInt8, flags: UInt8, stream: UInt32, payload: [UInt8]) -> [UInt8] {
        let length = payload.count
        return [UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF), type, flags,
                UInt8(stream >> 24 & 0x7F), UInt8(stream >> 16 & 0xFF), UInt8(stream >> 8 & 0xFF), UInt8(stream & 0xFF)] + payload
    }

    /// Exchanges frames until `done` holds, the server closes, or `seconds` pass.
    func run(seconds: Double = 5, until done: (NGHTTP2Client) -> Bool) {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end, !connectionClosed, !done(self) {
            flush()
            var buffer = [UInt8](repeating: 0, count: 65536)
            let count = recv(socket, &buffer, buffer.count, 0)
            if count == 0 { connectionClosed = true; break }
            if count > 0 {
                record(Array(buffer.prefix(count)))
                _ = nghttp2_session_mem_recv(session, buffer, count)
            }
            if sessionFinished { break }
        }
    }

    /// Exchanges SETTINGS both ways, with a deadline: the server's read and
    /// acknowledged (the acknowledgement sent), ours acknowledged by it.
    /// What a setting allows (e.g. extended CONNECT) holds from then on.
    func settle(seconds: Double = 5) {
        run(seconds: seconds) { client in
            client.rawFrames.contains { $0.type == 0x4 && $0.flags & 0x1 == 0 } && client.rawFrames.contains { $0.type == 0x4 && $0.flags & 0x1 != 0 }
        }
        flush()
    }

    /// Reads frames for the record only (libnghttp2 is not asked, so it
    /// cannot end the wait) until `done` holds or `seconds` pass.
    func readRaw(seconds: Double, until done: (NGHTTP2Client) -> Bool) {
        let end = Date().addingTimeInterval(seconds)
        var buffer = [UInt8](repeating: 0, count: 65536)
        while Date() < end, !connectionClosed, !done(self) {
            let count = recv(socket, &buffer, buffer.count, 0)
            if count == 0 { connectionClosed = true }
            if count > 0 { record(Array(buffer.prefix(count))) }
        }
    }

    /// Whether the server closes the connection within `seconds` (bytes
    /// still arriving are read and dropped; libnghttp2 is not asked).
    func closedByServer(within seconds: Double) -> Bool {
        let end = Date().addingTimeInterval(seconds)
        var buffer = [UInt8](repeating: 0, count: 65536)
        while Date() < end {
            if recv(socket, &buffer, buffer.count, 0) == 0 { return true }
        }
        return false
    }

    /// libnghttp2 has nothing left to read or write (e.g. after a GOAWAY with
    /// no open streams): a real client closes the connection now.
    var sessionFinished: Bool { nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 }

    private func record(_ bytes: [UInt8]) {
        rawBuffer += bytes
        while rawBuffer.count >= 9 {
            let length = Int(rawBuffer[0]) << 16 | Int(rawBuffer[1]) << 8 | Int(rawBuffer[2])
            guard rawBuffer.count >= 9 + length else { return }
            let type = rawBuffer[3]
            let stream = (UInt32(rawBuffer[5]) & 0x7F) << 24 | UInt32(rawBuffer[6]) << 16 | UInt32(rawBuffer[7]) << 8 | UInt32(rawBuffer[8])
            let payload = Array(rawBuffer[9..<(9 + length)])
            var code: UInt32?
            // RST_STREAM carries the code first, GOAWAY after the last stream id.
            let offset = type == 0x3 ? 0 : type == 0x7 ? 4 : -1
            if offset >= 0, payload.count >= offset + 4 {
                code = payload[offset..<(offset + 4)].reduce(0) { $0 << 8 | UInt32($1) }
            }
            rawFrames.append((type, stream, code, rawBuffer[4], length))
            if type == 0x0 { rawData[stream, default: []] += payload }
            if type == 0x7, payload.count >= 4 { goAwayLastStreamIDs.append(payload.prefix(4).reduce(0) { $0 << 8 | UInt32($1) } & 0x7FFF_FFFF) }
            rawBuffer.removeFirst(9 + length)
        }
    }

    private func flush() {
        nghttp2_session_send(session)
        if !outbound.isEmpty {
            write(outbound)
            outbound.removeAll()
        }
    }

    private func write(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent <= 0 { connectionClosed = true; return }
            offset += sent
        }
    }
}
