import NIOHPACK
import NIOHTTP1
import Rewriter

extension RequestHead {
    /// The request a client's HTTP/2 header block asks for, in HTTP/1.1 terms,
    /// as swift-nio-http2's HTTP/1 translation makes it: `:authority`
    /// becomes `host` (RFC 9113 §8.3.1: it wins over a Host header). How its
    /// body is framed is the stream's to say (`HTTP2StreamClientSide.framing`),
    /// never a synthesized field.
    /// Nil for a malformed block (RFC 9113 §8.2, §8.3, checked here in the one
    /// walk over the fields instead of by swift-nio-http2's validator): an
    /// unknown, repeated, late or missing pseudo-header, a name that is not a
    /// lower-case token, a connection-specific field, `te` other than
    /// `trailers`, CR, LF or NUL in a value; also for CONNECT, which the
    /// gateway does not tunnel, and for two Host fields standing in for a
    /// missing `:authority` (routing and the upstream could read different ones).
    init?(http2 block: HPACKHeaders, endStream: Bool) {
        var method: String?, path: String?, authority: String?, scheme: String?
        var fields: [HeaderList.Field] = []
        // Room for the host and the forwarding fields the gateway adds.
        fields.reserveCapacity(block.count + 8)
        var hasLength = false, hosts = 0, regular = false
        var cookies: [String] = []
        for (name, value, _) in block {
            if name.utf8.first == UInt8(ascii: ":") {
                guard !regular, HTTP2Fields.isValidPseudoValue(value) else { return nil }
                switch name {
                case ":method" where method == nil: method = value
                case ":path" where path == nil && !value.isEmpty: path = value
                case ":authority" where authority == nil: authority = value
                case ":scheme" where scheme == nil: scheme = value
                default: return nil
                }
                continue
            }
            guard HTTP2Fields.isAllowedRegular(name: name, value: value) else { return nil }
            regular = true
            if name == "host" {
                if authority != nil { continue }
                hosts += 1
            }
            if fields.isEmpty, let authority { fields.append(HeaderList.Field(name: "host", value: authority)) }
            if name == "content-length" { hasLength = true }
            // Split cookie fields are joined into one (RFC 9113 §8.2.3).
            if name == "cookie" {
                cookies.append(value)
                continue
            }
            fields.append(HeaderList.Field(name: name, value: value))
        }
        guard let method, let path, scheme != nil, hosts <= 1, method != "CONNECT" else { return nil }
        // A host and port only, as HTTP/1.1's Host: no userinfo (`user@host`).
        if let authority, !authority.utf8.allSatisfy(\.isHostChar) { return nil }
        if !cookies.isEmpty { fields.append(HeaderList.Field(name: "cookie", value: cookies.joined(separator: "; "))) }
        if fields.isEmpty, let authority { fields.append(HeaderList.Field(name: "host", value: authority)) }
        let headers = HeaderList(fields)
        // Content-Length is held to the HTTP/1.1 rules (an upstream that reads
        // `+45` its own way would desync); the DATA must then match it.
        if hasLength, (try? HTTP1RequestDecoder.contentLength(headers)) == nil { return nil }
        self.init(method: HTTPMethod(rawValue: method), uri: path, version: HTTPVersion(major: 2, minor: 0), headers: headers)
    }
}

/// RFC 9113 §8.2's rules for the fields of a block a client sends.
enum HTTP2Fields {
    /// A trailer block: regular fields only, each allowed.
    static func isValidTrailers(_ block: HPACKHeaders) -> Bool {
        block.allSatisfy { name, value, _ in name.utf8.first != UInt8(ascii: ":") && isAllowedRegular(name: name, value: value) }
    }

    /// A lower-case token name that is not connection-specific (`te` only as
    /// `trailers`), and a value without CR, LF or NUL that neither starts nor
    /// ends with whitespace (RFC 9113 §8.2.1).
    static func isAllowedRegular(name: String, value: String) -> Bool {
        guard !name.isEmpty, name.utf8.allSatisfy(isLowercaseTokenByte), !value.utf8.contains(where: { $0 == 0 || $0 == 0x0A || $0 == 0x0D }),
            !isWhitespace(value.utf8.first), !isWhitespace(value.utf8.last)
        else { return false }
        switch name.utf8.count {
        case 2: return name != "te" || value == "trailers"
        case 7: return name != "upgrade"
        case 10: return name != "connection" && name != "keep-alive"
        case 16: return name != "proxy-connection"
        case 17: return name != "transfer-encoding"
        default: return true
        }
    }

    private static func isWhitespace(_ byte: UInt8?) -> Bool { byte == 0x20 || byte == 0x09 }

    /// Pseudo-header values end up in a request line: no space, control
    /// character or DEL (as swift-nio-http2 checks them).
    static func isValidPseudoValue(_ value: String) -> Bool {
        !value.utf8.contains { $0 <= 0x20 || $0 == 0x7F }
    }

    /// RFC 9110 tchar without upper-case letters (RFC 9113 §8.2.1).
    private static func isLowercaseTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"): true
        case 0x21, 0x23...0x27, 0x2A, 0x2B, 0x2E, 0x5E, 0x5F, 0x60, 0x7C, 0x7E: true
        default: false
        }
    }
}

extension HPACKHeaders {
    /// a response's head as an HTTP/2 header block: `:status` first, names in
    /// lower case, hop-by-hop fields (RFC 9113 §8.2.2's connection-specific
    /// ones among them, such as a `Connection: close` of our own) left out.
    init(response head: ResponseHead) {
        self.init()
        reserveCapacity(head.headers.count + 1)
        add(name: ":status", value: String(head.status.code))
        for field in head.headers where !HeaderList.isHopByHop(field.name) {
            let name = field.name, value = field.value
            let lowercase = name.utf8.contains(where: { $0 &- UInt8(ascii: "A") < 26 }) ? name.lowercased() : name
            // A request id is new on every answer: kept out of the HPACK
            // table, it neither evicts what repeats nor costs a table search.
            add(name: lowercase, value: value, indexing: lowercase == "x-request-id" ? .nonIndexable : .indexable)
        }
    }
}
