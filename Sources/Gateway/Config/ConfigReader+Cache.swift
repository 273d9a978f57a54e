import Rewriter
import Yams

extension ConfigReader {
    /// Top-level `cache`: the memory all stored answers share.
    func readCache(_ node: Node, _ path: String) -> CacheConfig? {
        guard let fields = mapping(node, path, known: ["max_bytes", "max_entry_bytes"]) else { return nil }
        defer { fields.finish() }
        var cache = CacheConfig()
        if let n = fields.take("max_bytes"), let v = byteSize(n, fields.path("max_bytes"), in: 1024...(1 << 40)) { cache.maxBytes = v }
        if let n = fields.take("max_entry_bytes"), let v = byteSize(n, fields.path("max_entry_bytes"), in: 1...(1 << 40)) { cache.maxEntryBytes = v }
        if cache.maxEntryBytes > cache.maxBytes {
            report(node, fields.path("max_entry_bytes"), "must be at most max_bytes (\(cache.maxBytes)): no answer that large could be kept")
        }
        return cache
    }

    /// A route's `cache` (docs/caching.md).
    func readRouteCache(_ node: Node, _ path: String, hasStore: Bool) -> RouteCacheConfig? {
        guard let fields = mapping(node, path, known: ["ttl", "key", "stale_while_revalidate", "stale_if_error", "coalesce", "scope"]) else { return nil }
        defer { fields.finish() }
        var cache = RouteCacheConfig()
        if let n = fields.take("ttl"), let v = duration(n, fields.path("ttl")) { cache.ttl = v }
        if let n = fields.take("stale_while_revalidate"), let v = duration(n, fields.path("stale_while_revalidate")) { cache.staleWhileRevalidate = v }
        if let n = fields.take("stale_if_error"), let v = duration(n, fields.path("stale_if_error")) { cache.staleIfError = v }
        if let n = fields.take("coalesce"), let v = bool(n, fields.path("coalesce")) { cache.coalesce = v }
        if let n = fields.take("key"), let items = sequence(n, fields.path("key")) {
            cache.key = []
            for (index, item) in items.enumerated() {
                let itemPath = fields.path("key") + "[\(index)]"
                guard let text = string(item, itemPath) else { continue }
                let part: RouteCacheConfig.KeyPart
                if text == "query" {
                    part = .query
                } else if text.hasPrefix("header:"), HeaderList.isValidName(String(text.dropFirst(7))) {
                    part = .header(text.dropFirst(7).lowercased())
                } else {
                    report(item, itemPath, "expected query or header:NAME, found '\(text)'")
                    continue
                }
                if cache.key.contains(part) { warn(item, itemPath, "'\(text)' is in the key already") } else { cache.key.append(part) }
            }
        }
        if let n = fields.take("scope"), let scope = storeScope(n, fields.path("scope"), hasStore: hasStore) {
            cache.scope = scope
        }
        return cache
    }

    /// A size in bytes: an integer, or one with a unit (KiB, MiB, GiB; KB, MB, GB are read as the same powers of 1024, as nginx reads k and m).
    func byteSize(_ node: Node, _ path: String, in range: ClosedRange<Int>) -> Int? {
        if node.tagName == .int { return int(node, path, in: range) }
        guard case .scalar(let scalar) = node else {
            report(node, path, "expected a size such as 8MiB or 65536, found \(describe(node))")
            return nil
        }
        let text = scalar.string
        let digits = text.prefix { $0.isASCII && $0.isNumber }
        let units: [String: Int] = ["": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MB": 1 << 20, "MIB": 1 << 20,
                                    "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30]
        guard !digits.isEmpty, digits.count <= 12, let number = Int(digits),
            let unit = units[text.dropFirst(digits.count).trimmingSpaces.uppercased()]
        else {
            report(node, path, "expected a size such as 8MiB or 65536, found \(describe(node))")
            return nil
        }
        let value = number.multipliedReportingOverflow(by: unit)
        guard !value.overflow, range.contains(value.partialValue) else {
            report(node, path, "must be between \(range.lowerBound) and \(range.upperBound) bytes, found \(text)")
            return nil
        }
        return value.partialValue
    }
}
