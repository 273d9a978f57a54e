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

    init(_ headers: HeaderList) {
        headers.forEachValue(named: "Cache-Control") { value in
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
