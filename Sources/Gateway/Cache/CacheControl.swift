import Rewriter

/// The `Cache-Control` directives a shared cache acts on (RFC 9111 section
/// 5.2), read from every `Cache-Control` field of a message. Unknown
/// directives are ignored; a malformed delta-seconds counts as absent,
/// except in `max-age`/`s-maxage`, where it makes the answer stale at once
/// (section 4.2.1: a cache treats an invalid freshness as stale).
struct CacheControl: Equatable, Sendable {
    var noStore = false
    var noCache = false
    var isPrivate = false
    var isPublic = false
    var mustRevalidate = false
    var proxyRevalidate = false
    var maxAge: Int64?
    var sMaxAge: Int64?
    var staleWhileRevalidate: Int64?
    var staleIfError: Int64?

    init() {}

    /// A response's directives: `CDN-Cache-Control` (RFC 9213, the field
    /// targeted at gateway caches such as this one) in place of `Cache-Control` when present.
    /// One that is not a valid Structured Field dictionary (RFC 8941) is ignored, as RFC 9213 says.
    init(answer headers: HeaderList) {
        let targeted = headers.values("CDN-Cache-Control")
        self.init(headers, field: !targeted.isEmpty && targeted.allSatisfy(Self.isDictionary) ? "CDN-Cache-Control" : "Cache-Control")
    }

    /// Whether `value` reads as a Structured Field dictionary whose values are
    /// integers, tokens or strings (the directives' own are integers or bare).
    static func isDictionary(_ value: String) -> Bool {
        let numeric: Set<Substring> = ["max-age", "s-maxage", "stale-while-revalidate", "stale-if-error"]
        return value.split(separator: ",").allSatisfy { member in
            let parts = member.trimmingSpaces.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = parts[0]
            guard let first = key.utf8.first, first == UInt8(ascii: "*") || (0x61...0x7A).contains(first),
                key.utf8.allSatisfy({ (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || "_-.*".utf8.contains($0) })
            else { return false }
            guard parts.count == 2 else { return true }
            let item = parts[1]
            let integer = !item.isEmpty && item.utf8.count <= 15 && item.drop { $0 == "-" }.utf8.allSatisfy { (0x30...0x39).contains($0) }
            if numeric.contains(key) { return integer }
            let quoted = item.count >= 2 && item.first == "\"" && item.last == "\""
            let token = item.first.map { $0.isLetter || $0 == "*" } ?? false && item.utf8.allSatisfy(HeaderList.isTokenByte)
            return integer || quoted || token
        }
    }

    init(_ headers: HeaderList, field: String = "Cache-Control") {
        headers.forEachValue(named: field) { value in
            for directive in value.split(separator: ",") { read(directive) }
        }
    }

    private mutating func read(_ directive: Substring) {
        let parts = directive.split(separator: "=", maxSplits: 1)
        guard let rawName = parts.first else { return }
        let name = rawName.trimmingSpaces.lowercased()
        let argument = parts.count > 1 ? Self.unquoted(parts[1].trimmingSpaces) : nil
        switch name {
        case "no-store": noStore = true
        // `no-cache="Set-Cookie"` (a field list) is stricter than the cache needs: the whole answer revalidates.
        case "no-cache": noCache = true
        case "private": isPrivate = true
        case "public": isPublic = true
        case "must-revalidate": mustRevalidate = true
        case "proxy-revalidate": proxyRevalidate = true
        case "max-age": maxAge = Self.seconds(argument) ?? 0
        case "s-maxage": sMaxAge = Self.seconds(argument) ?? 0
        case "stale-while-revalidate": staleWhileRevalidate = Self.seconds(argument)
        case "stale-if-error": staleIfError = Self.seconds(argument)
        default: return
        }
    }

    /// delta-seconds (RFC 9111 section 1.2.2): digits only; past 2^31 it is 2^31.
    static func seconds(_ text: Substring?) -> Int64? {
        guard let text, !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return text.utf8.count > 10 ? 2_147_483_648 : min(Int64(text)!, 2_147_483_648)
    }

    private static func unquoted(_ text: Substring) -> Substring {
        guard text.count >= 2, text.first == "\"", text.last == "\"" else { return text }
        return text.dropFirst().dropLast()
    }
}
