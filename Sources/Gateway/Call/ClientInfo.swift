import Rewriter

/// Who called, as the upstream is told in X-Forwarded-* and X-Request-Id.
public struct ClientInfo: Sendable, Hashable {
    /// The peer's IP address.
    public var address: String
    /// `http` or `https`, as the client spoke to the gateway.
    public var scheme: String
    /// The call's `X-Request-Id`: the client's when valid, else one made here.
    public var requestID: String
    /// The peer is a trusted proxy (`forwarded.trust`): what it says in
    /// X-Forwarded-* is kept. From any other peer those fields are the
    /// client's claim, and replaced.
    public var trustedPeer: Bool

    /// A client at `address` that spoke `scheme`.
    public init(address: String, scheme: String, requestID: String, trustedPeer: Bool = false) {
        self.address = address
        self.scheme = scheme
        self.requestID = requestID
        self.trustedPeer = trustedPeer
    }

    /// X-Forwarded-For / -Proto / -Host as nginx and Envoy write them: from a
    /// trusted peer appended to (a comma list, the closest proxy last), from
    /// any other started afresh, so a client cannot choose its scheme or
    /// host; and X-Request-Id set.
    func addForwardingHeaders(to headers: inout HeaderList) {
        if !trustedPeer {
            headers.remove("X-Forwarded-For")
            headers.remove("X-Forwarded-Proto")
            headers.remove("X-Forwarded-Host")
        }
        append("X-Forwarded-For", address, to: &headers)
        append("X-Forwarded-Proto", scheme, to: &headers)
        if let host = headers["Host"] { append("X-Forwarded-Host", host, to: &headers) }
        headers.set("X-Request-Id", requestID)
    }

    private func append(_ name: String, _ value: String, to headers: inout HeaderList) {
        guard headers.contains(name) else { return headers.add(name, value) }
        headers.set(name, (headers.values(name) + [value]).joined(separator: ", "))
    }

    /// The client's own X-Request-Id when it sent a sane one, else 32 random hex digits.
    public static func requestID(from headers: HeaderList, random: inout some RandomNumberGenerator) -> String {
        if let given = headers["X-Request-Id"], !given.isEmpty, given.utf8.count <= 128,
            given.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        {
            return given
        }
        let words = (random.next(), random.next())
        return String(unsafeUninitializedCapacity: 32) { buffer in
            for i in 0..<32 {
                let word = i < 16 ? words.0 : words.1
                let nibble = UInt8(truncatingIfNeeded: word >> UInt64(60 - (i % 16) * 4)) & 0xF
                buffer[i] = nibble < 10 ? 0x30 + nibble : 0x57 + nibble
            }
            return 32
        }
    }
}

