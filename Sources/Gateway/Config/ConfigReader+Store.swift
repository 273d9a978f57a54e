import Foundation
import Yams

extension ConfigReader {
    /// `store: {redis: {url, password, timeout, key_prefix}}`.
    func readStore(_ node: Node, _ path: String) -> StoreConfig? {
        guard let fields = mapping(node, path, known: ["redis"]) else { return nil }
        defer { fields.finish() }
        guard let n = fields.take("redis") else {
            report(node, fields.path("redis"), "missing")
            return nil
        }
        guard let redis = mapping(n, fields.path("redis"), known: ["url", "password", "timeout", "key_prefix", "ca_file"]) else { return nil }
        defer { redis.finish() }
        var store: StoreConfig?
        if let n = redis.take("url"), let url = string(n, redis.path("url")) {
            store = StoreConfig.parse(url: url)
            if store == nil { report(n, redis.path("url"), "expected redis://[:password@]host[:port][/db] or rediss://..., found '\(url)'") }
            if let password = store?.password { keepSecret(password) }
        } else if !redis.has("url") {
            report(n, redis.path("url"), "missing")
        }
        if let n = redis.take("password"), let password = string(n, redis.path("password")) {
            keepSecret(password)
            store?.password = password.isEmpty ? nil : password
        }
        if let n = redis.take("timeout"), let timeout = duration(n, redis.path("timeout")) {
            if timeout > .zero && timeout <= .seconds(10) { store?.timeout = timeout } else { report(n, redis.path("timeout"), "must be more than 0 and at most 10s") }
        }
        if let n = redis.take("key_prefix"), let prefix = string(n, redis.path("key_prefix")) { store?.keyPrefix = prefix }
        if let n = redis.take("ca_file"), let path = string(n, redis.path("ca_file")) {
            let resolved = resolvePath(path)
            if !FileManager.default.isReadableFile(atPath: resolved) { report(n, redis.path("ca_file"), "cannot read \(resolved)") }
            if store?.tls == false { warn(n, redis.path("ca_file"), "only used with a rediss:// url") }
            store?.caFile = resolved
        }
        return store
    }

    /// A `scope` or `share` key: local or fleet, fleet only with a store.
    func storeScope(_ node: Node, _ path: String, hasStore: Bool) -> StoreScope? {
        let scope = oneOf(node, path, StoreScope.self)
        if scope == .fleet, !hasStore { report(node, path, "fleet needs a top-level store (store: {redis: {url: ...}})") }
        return scope
    }
}
