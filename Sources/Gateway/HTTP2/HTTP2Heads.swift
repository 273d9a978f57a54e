import NIOHTTP1
import Rewriter

/// A client's HTTP/2 request header block, field by field, turned into the
/// request it asks for in HTTP/1.1 terms: `:authority` becomes `host`
/// (RFC 9113 §8.3.1: it wins over a Host header), split cookies are joined
/// (§8.2.3). How its body is framed is the stream's to say, never a
/// synthesized field. libnghttp2 has checked the block against RFC 9113
/// already; these checks stand on their own anyway (the fuzzer drives them
/// directly): `head()` is nil for an unknown, repeated, late or missing
/// pseudo-header, a name that is not a lower-case token, a
/// connection-specific field, `te` other than `trailers`, CR, LF or NUL in
/// a value; for CONNECT, which the gateway does not tunnel; and for two Host
/// fields standing in for a missing `:authority` (routing and the upstream
/// could read different ones).
struct HTTP2RequestHeadBuilder {
    private var method: String?, path: String?, authority: String?, scheme: String?
    /// RFC 8441's extended CONNECT: the protocol a tunnel is asked for (`websocket`).
    private(set) var connectProtocol: String?
    private var fields: [HeaderList.Field] = []
    private var hasLength = false, hosts = 0, regular = false, malformed = false
    private var cookies: [String] = []

    mutating func add(name: String, value: String) {
        guard !malformed else { return }
        if name.utf8.first == UInt8(ascii: ":") {
            guard !regular, HTTP2Fields.isValidPseudoValue(value) else { return malformed = true }
            switch name {
            case ":method" where method == nil: method = value
            case ":path" where path == nil && !value.isEmpty: path = value
            case ":authority" where authority == nil: authority = value
            case ":scheme" where scheme == nil: scheme = value
            case ":protocol" where connectProtocol == nil && !value.isEmpty: connectProtocol = value.lowercased()
            default: malformed = true
            }
            return
        }
        guard HTTP2Fields.isAllowedRegular(name: name, value: value) else { return malformed = true }
        regular = true
        if name == "host" {
            if authority != nil { return }
            hosts += 1
        }
        if fields.isEmpty { startFields() }
        if name == "content-length" { hasLength = true }
        if name == "cookie" { return cookies.append(value) }
        fields.append(HeaderList.Field(name: name, value: value))
    }

    /// An extended CONNECT (RFC 8441) becomes the HTTP/1.1 upgrade it stands
    /// for: `GET` with `Upgrade: <protocol>` and `Connection: Upgrade`, and for
    /// a WebSocket the `Sec-WebSocket-Key` HTTP/1.1 requires (`key`, fresh per call).
    /// Consuming: the head takes the fields over, so its call's first edit
    /// of them does not copy them all.
    consuming func head(websocketKey key: @autoclosure () -> String = "") -> RequestHead? {
        if let connectProtocol {
            guard method == "CONNECT", var head = Self.with(method: "GET", self).head() else { return nil }
            head.headers.set("Upgrade", connectProtocol)
            head.headers.set("Connection", "Upgrade")
            if connectProtocol == "websocket", !head.headers.contains("Sec-WebSocket-Key") { head.headers.set("Sec-WebSocket-Key", key()) }
            return head
        }
        guard !malformed, let method, let path, scheme != nil, hosts <= 1, method != "CONNECT" else { return nil }
        // A host and port only, as HTTP/1.1's Host: no userinfo (`user@host`).
        if let authority, !authority.utf8.allSatisfy(\.isHostChar) { return nil }
        if self.fields.isEmpty, authority != nil { startFields() }
        var fields: [HeaderList.Field] = []
        swap(&fields, &self.fields)
        if !cookies.isEmpty { fields.append(HeaderList.Field(name: "cookie", value: cookies.joined(separator: "; "))) }
        let headers = HeaderList(fields)
        // Content-Length is held to the HTTP/1.1 rules (an upstream that reads
        // `+45` its own way would desync); the DATA must then match it.
        if hasLength, (try? HTTP1RequestDecoder.contentLength(headers)) == nil { return nil }
        return RequestHead(method: HTTPMethod(rawValue: method), uri: path, version: HTTPVersion(major: 2, minor: 0), headers: headers)
    }

    /// Room for the host and the forwarding fields the gateway adds, taken
    /// with the first field (an empty builder allocates nothing), and the host.
    private mutating func startFields() {
        fields.reserveCapacity(16)
        if let authority { fields.append(HeaderList.Field(name: "host", value: authority)) }
    }

    private static func with(method: String, _ builder: HTTP2RequestHeadBuilder) -> HTTP2RequestHeadBuilder {
        var plain = builder
        plain.method = method
        plain.connectProtocol = nil
        return plain
    }

    /// What the block asked for, as far as it is known: for the access line
    /// of a request refused before it was read whole.
    var summary: RequestHead {
        RequestHead(method: HTTPMethod(rawValue: method ?? "GET"), uri: path ?? "/", version: HTTPVersion(major: 2, minor: 0), headers: [:])
    }
}

/// RFC 9113 §8.2's rules for the fields of a block a client sends.
enum HTTP2Fields {
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

extension HeaderBlock {
    /// A response's head as an HTTP/2 header block: `:status` first, names in
    /// lower case, hop-by-hop fields (RFC 9113 §8.2.2's connection-specific
    /// ones among them, such as a `Connection: close` of our own) left out.
    init(response head: ResponseHead) {
        // Read once: an HTTP/1.1 upstream's fields are made a list at each read.
        let headers = head.headers
        self.init(capacity: headers.count + 1)
        add(":status", String(head.status.code))
        headers.withFields { fields in
            for i in fields.indices where !HeaderList.isHopByHop(fields[i].name) {
                // A request id is new on every answer: kept out of the HPACK table.
                add(fields[i].name, fields[i].value, indexed: !HeaderList.equalNames(fields[i].name, "X-Request-Id"))
            }
        }
    }

    /// Trailer fields: regular, end-to-end ones only.
    init(trailers: HTTPHeaders) {
        self.init(capacity: trailers.count)
        for (name, value) in trailers where !HeaderList.isHopByHop(name) && name.utf8.first != UInt8(ascii: ":") { add(name, value) }
    }
}
