internal import CZlib

/// An answer's `Content-Encoding` undone before it is translated: gzip or
/// deflate (zlib-wrapped, or raw as some servers send it) by zlib's inflate,
/// into at most `limit` bytes, so a compression bomb costs `limit` and no
/// more. Written against zlib directly: the one inflater in the tree
/// (NIOHTTPCompression's) is a channel handler over NIOHTTP1's parts.
enum ContentCoding {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The body decoded; nil for an identity (or absent) coding.
    static func decode(_ body: [UInt8], coding: String?, limit: Int) -> Result<[UInt8], Failure>? {
        guard let coding else { return nil }
        switch Substring(coding.lowercased()).trimmingSpaces {
        case "", "identity": return nil
        case "gzip", "x-gzip": return inflate(body, windowBits: 16 + MAX_WBITS, limit: limit)
        case "deflate":
            if case .success(let bytes) = inflate(body, windowBits: MAX_WBITS, limit: limit) { return .success(bytes) }
            return inflate(body, windowBits: -MAX_WBITS, limit: limit)
        default: return .failure(Failure(description: "Content-Encoding \(coding) is not one gatewayd decodes (gzip, deflate)"))
        }
    }

    private static func inflate(_ body: [UInt8], windowBits: Int32, limit: Int) -> Result<[UInt8], Failure> {
        var stream = z_stream()
        guard inflateInit2_(&stream, windowBits, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            return .failure(Failure(description: "zlib could not start"))
        }
        defer { inflateEnd(&stream) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        return body.withUnsafeBufferPointer { input -> Result<[UInt8], Failure> in
            stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress)
            stream.avail_in = uInt(input.count)
            while true {
                let status = chunk.withUnsafeMutableBufferPointer { buffer -> Int32 in
                    stream.next_out = buffer.baseAddress
                    stream.avail_out = uInt(buffer.count)
                    return CZlib.inflate(&stream, Z_NO_FLUSH)
                }
                let produced = chunk.count - Int(stream.avail_out)
                guard out.count + produced <= limit else {
                    return .failure(Failure(description: "inflates past limits.max_response_body_bytes (\(limit))"))
                }
                out.append(contentsOf: chunk[..<produced])
                switch status {
                case Z_STREAM_END:
                    guard stream.avail_in == 0 else { return .failure(Failure(description: "bytes after the compressed stream")) }
                    return .success(out)
                case Z_OK:
                    continue
                case Z_BUF_ERROR where stream.avail_in == 0:
                    return .failure(Failure(description: "the compressed stream is truncated"))
                default:
                    let message = stream.msg.map { String(cString: $0) } ?? "status \(status)"
                    return .failure(Failure(description: "not a valid compressed stream: \(message)"))
                }
            }
        }
    }
}
