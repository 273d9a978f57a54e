import NIOCore
import Rewriter

/// How a request's body is delimited, as data: each protocol writes it its
/// own way (HTTP/1.1: a `Content-Length` or `Transfer-Encoding: chunked`
/// field; HTTP/2: `content-length` or nothing), and no header list ever
/// carries a framing field the gateway did not compute.
public enum RequestFraming: Sendable, Hashable {
    /// No body.
    case none
    /// Exactly this many bytes.
    case length(Int)
    /// A body of unknown length that streams as it arrives.
    case streamed
}

/// The request that goes upstream, fully built: target joined with the
/// upstream's base URL, headers layered in docs/translation.md's precedence order.
public struct UpstreamRequest: Sendable, Hashable {
    /// The method, as sent.
    public var method: String
    /// The path and query, joined with the upstream's base path and query.
    public var target: String
    /// Never `Content-Length` or `Transfer-Encoding`: `framing` says those.
    public var headers: HeaderList
    /// nil: no body (or, for a pass-through route, the client's body streams).
    public var body: [UInt8]?
    /// How the body is delimited on the wire.
    public var framing: RequestFraming

    /// A request; `framing` defaults to the body's length (none without one).
    public init(method: String, target: String, headers: HeaderList, body: [UInt8]?, framing: RequestFraming? = nil) {
        self.method = method
        self.target = target
        self.headers = headers
        // Computed, not set by `frameBody()`: a mutating call inside the
        // initializer made the optimizer copy the whole request once built.
        (self.body, self.framing) = framing.map { (body, $0) } ?? Self.framed(body, method: method)
    }

    /// An allowed switch of protocols asks the upstream too: `Upgrade` is
    /// hop-by-hop, so `build` dropped it, and the allowed protocol alone is
    /// asked (never h2c, never HTTP2-Settings).
    public mutating func askUpgrade(to protocolName: String) {
        headers.set("Connection", "Upgrade")
        headers.set("Upgrade", protocolName)
    }

    /// Framing true to the buffered body. An empty POST, PUT or PATCH says
    /// length 0, as nginx sends it: some servers refuse those without a length.
    public mutating func frameBody() { (body, framing) = Self.framed(body, method: method) }

    /// `body` (nil when empty) and the framing true to it.
    private static func framed(_ body: [UInt8]?, method: String) -> ([UInt8]?, RequestFraming) {
        if let body, !body.isEmpty { return (body, .length(body.count)) }
        return (nil, method == "POST" || method == "PUT" || method == "PATCH" ? .length(0) : .none)
    }

    /// HTTP/1.1 wire form: request line, headers, framing, blank line, body —
    /// the bytes an upstream connection writes.
    public var wireFormat: [UInt8] {
        var out = ByteBuffer()
        out.writeRequestHead(method: method, target: target, headers: headers, framing: framing)
        if let body { out.writeBytes(body) }
        return Array(out.readableBytesView)
    }
}

extension HeaderList {
    /// Connection-level headers (RFC 9110 section 7.6.1), never forwarded:
    /// `isHopByHopName` on the name's bytes.
    static func isHopByHop(_ name: String) -> Bool {
        var name = name
        return name.withUTF8 { UnsafeRawBufferPointer($0).isHopByHopName }
    }

    /// What `isHopByHop` accepts, for `mayContain(anyOf:)`'s filter.
    static let hopByHopNames = ["te", "upgrade", "trailer", "connection", "keep-alive", "http2-settings", "proxy-connection",
                                "transfer-encoding", "proxy-authenticate", "proxy-authorization"]

    /// The names a `Connection` header lists (`Connection: close, X-Foo`).
    static func connectionTokens(_ values: some Sequence<String>) -> [Substring] {
        values.flatMap { $0.split(separator: ",") }.map { $0.drop { $0 == " " || $0 == "\t" } }.map {
            $0.prefix { $0 != " " && $0 != "\t" }
        }
    }

    /// `Expect: 100-continue`: the client waits for a 100 before its body.
    var expectsContinue: Bool { self["Expect"].map { Self.equalNames($0, "100-continue") } ?? false }

    /// The items of every field named `name`, a comma-separated list
    /// (RFC 9110 section 5.6.1): whitespace around items and empty items dropped.
    func listItems(_ name: String) -> [Substring] {
        var items: [Substring] = []
        forEachValue(named: name) { value in
            for var item in value.split(separator: ",") {
                while let first = item.first, first == " " || first == "\t" { item = item.dropFirst() }
                while let last = item.last, last == " " || last == "\t" { item = item.dropLast() }
                if !item.isEmpty { items.append(item) }
            }
        }
        return items
    }

    static let hopByHopBits = nameBits(hopByHopNames)

    /// Drops the hop-by-hop headers and every header `Connection` names.
    mutating func removeHopByHop() {
        // Most requests carry none: no walk over their fields.
        guard mayContain(anyOf: Self.hopByHopBits) else { return }
        // One pass to find what goes (usually just `Connection: keep-alive`):
        // how many fixed names are there and the first's place, and the
        // names a Connection lists (rare).
        var found = 0, first = 0
        var named: [Substring] = []
        withFields { fields in
            for i in fields.indices where Self.isHopByHop(fields[i].name) {
                if found == 0 { first = i }
                found += 1
                // `Connection: keep-alive` / `close` (nearly every response) names no header.
                guard Self.equalNames(fields[i].name, "Connection"), !Self.equalNames(fields[i].value, "keep-alive"),
                    !Self.equalNames(fields[i].value, "close")
                else { continue }
                named += Self.connectionTokens(CollectionOfOne(fields[i].value)).filter { $0 != "close" && $0 != "keep-alive" }
            }
        }
        guard found > 0 else { return }
        // The one field found goes by its place: a predicate would see a copy of every field.
        if found == 1, named.isEmpty { return remove(at: first) }
        let listed = named.map(String.init)
        removeAll { field in Self.isHopByHop(field.name) || listed.contains { Self.equalNames($0, field.name) } }
    }
}
