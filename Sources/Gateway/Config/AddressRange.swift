import Glibc

/// An IP address range in CIDR notation (`10.0.0.0/8`, `::1/128`, or a bare
/// address for one host): the peers a listener trusts to tell it who the
/// client is (`forwarded.trust`).
public struct AddressRange: Sendable, Hashable, CustomStringConvertible {
    /// The network's bytes (4 or 16) and how many leading bits must match.
    let bytes: [UInt8]
    let prefix: Int
    /// The range as written.
    public let description: String

    /// Parses a CIDR range or a bare address; nil when malformed.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let bytes = Self.bytes(of: String(parts[0])) else { return nil }
        let bits = bytes.count * 8
        if parts.count == 2 {
            guard let prefix = Int(parts[1]), (0...bits).contains(prefix), parts[1].allSatisfy(\.isASCII) else { return nil }
            self.prefix = prefix
        } else {
            prefix = bits
        }
        self.bytes = bytes
        description = text
    }

    /// Whether `address` (an IP address as text, as a peer's is written) lies in the range.
    public func contains(_ address: String) -> Bool {
        guard let other = Self.bytes(of: address) else { return false }
        // An IPv4 peer seen on a dual-stack socket (::ffff:a.b.c.d) matches an IPv4 range.
        let candidate = bytes.count == 4 && other.count == 16 && other.prefix(12) == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF]
            ? Array(other.suffix(4)) : other
        guard candidate.count == bytes.count else { return false }
        var left = prefix
        for (a, b) in zip(bytes, candidate) where left > 0 {
            let mask: UInt8 = left >= 8 ? 0xFF : ~(0xFF >> UInt8(left))
            if a & mask != b & mask { return false }
            left -= 8
        }
        return true
    }

    /// The address's bytes: 4 for IPv4, 16 for IPv6; nil when it is neither.
    static func bytes(of text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }
}

extension [AddressRange] {
    /// Whether any range holds `address`.
    public func contains(address: String) -> Bool { !isEmpty && contains { $0.contains(address) } }

    /// Who the client is, as nginx's `real_ip_recursive` reads it: the TCP
    /// peer, unless it is trusted; then the rightmost `X-Forwarded-For`
    /// entry that is not trusted (the leftmost when all are).
    public func clientAddress(peer: String, forwardedFor: @autoclosure () -> [String]) -> String {
        guard contains(address: peer) else { return peer }
        let entries = forwardedFor().flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }
        guard let last = entries.last(where: { !$0.isEmpty && !contains(address: $0) }) else {
            return entries.first(where: \.isIPAddress) ?? peer
        }
        return last.isIPAddress ? last : peer
    }
}
