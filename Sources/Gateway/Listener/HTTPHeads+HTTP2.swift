import NIOHPACK
import NIOHTTP1
import Rewriter

extension HTTPRequestHead {
    /// The request a client's HTTP/2 header block asks for, in HTTP/1.1 terms,
    /// as swift-nio-http2's HTTP/1 translation makes it: `:authority`
    /// becomes `host` (RFC 9113 §8.3.1: it wins over a Host header), and a
    /// body-carrying method without a length says how its body is framed.
    /// Nil when a mandatory pseudo-header is missing or one is unknown, or
    /// when two Host fields stand in for a missing `:authority` (routing and
    /// the upstream could read different ones).
    init?(http2 block: HPACKHeaders, endStream: Bool) {
        var method: String?, path: String?, authority: String?, scheme = false
        var headers = HTTPHeaders()
        headers.reserveCapacity(block.count + 1)
        var hasLength = false, hosts = 0
        for (name, value, _) in block {
            if name.utf8.first == UInt8(ascii: ":") {
                switch name {
                case ":method": method = value
                case ":path": path = value
                case ":authority": authority = value
                case ":scheme": scheme = true
                default: return nil
                }
                continue
            }
            if name == "host" {
                if authority != nil { continue }
                hosts += 1
            }
            if headers.isEmpty, let authority { headers.add(name: "host", value: authority) }
            if name == "content-length" { hasLength = true }
            headers.add(name: name, value: value)
        }
        guard let method, let path, scheme, hosts <= 1 else { return nil }
        if headers.isEmpty, let authority { headers.add(name: "host", value: authority) }
        let httpMethod = HTTPMethod(rawValue: method)
        switch httpMethod {
        case .GET, .HEAD, .DELETE, .CONNECT, .TRACE: break
        default:
            if !hasLength { headers.add(name: endStream ? "content-length" : "transfer-encoding", value: endStream ? "0" : "chunked") }
        }
        self.init(version: HTTPVersion(major: 2, minor: 0), method: httpMethod, uri: path, headers: headers)
    }
}

extension HPACKHeaders {
    /// An answer's head as an HTTP/2 header block: `:status` first, names in
    /// lower case, hop-by-hop fields (RFC 9113 §8.2.2's connection-specific
    /// ones among them, such as a `Connection: close` of our own) left out.
    init(response head: HTTPResponseHead) {
        self.init()
        reserveCapacity(head.headers.count + 1)
        add(name: ":status", value: String(head.status.code))
        for (name, value) in head.headers where !HeaderList.isHopByHop(name) {
            let lowercase = name.utf8.contains(where: { $0 &- UInt8(ascii: "A") < 26 }) ? name.lowercased() : name
            // A request id is new on every answer: kept out of the HPACK
            // table, it neither evicts what repeats nor costs a table search.
            add(name: lowercase, value: value, indexing: lowercase == "x-request-id" ? .nonIndexable : .indexable)
        }
    }
}
