import Rewriter

/// Who called, as the upstream is told in X-Forwarded-* and X-Request-Id.
public struct ClientInfo: Sendable, Hashable {
    /// The peer's IP address.
    public var address: String
    /// `http` or `https`, as the client spoke to the gateway.
    public var scheme: String
    public var requestID: String

    public init(address: String, scheme: String, requestID: String) {
        self.address = address
        self.scheme = scheme
        self.requestID = requestID
    }

    /// Appends to X-Forwarded-For / -Proto / -Host as nginx and Envoy do (a
    /// comma list, the closest proxy last), and sets X-Request-Id.
    func addForwardingHeaders(to headers: inout HeaderList) {
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

