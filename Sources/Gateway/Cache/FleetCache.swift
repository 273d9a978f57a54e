import NIOCore
import Rewriter

/// `cache: {scope: fleet}`: a route's stored answers shared through the
/// store, behind the process's own cache (a local hit asks nothing of the
/// store). A local miss asks the store once: a fresh answer there is served
/// and kept locally; else the call takes the key's short lock and goes
/// upstream, publishing what it stores; else another process is filling the
/// key and the call asks again every 50 ms until its answer is there or the
/// lock is gone. A store that fails or is slow leaves the call to the local
/// cache alone, after at most the store's `timeout`.
///
/// A value is `<fresh_until>\n<JSON>` (docs/caching.md): the seconds since
/// 1970 until which it is fresh (read by the claim script), then the answer
/// as the client got it. Whoever can write the store can write it, so a
/// value is read as untrusted input: bounded, every field checked as the
/// upstream's would be, its freshness made again here from its own fields
/// under this process's route config.
struct FleetCache: Sendable {
    let store: RedisClient
    let route: String

    /// The longest value written or read: the store's replies are bounded at 1 MiB.
    static let maxValueBytes = 1_000_000
    /// The longest a value is kept in the store, whatever its freshness.
    static let maxKept: Int64 = 86_400
    /// How often a call waiting for another process's fill asks again.
    static let pollInterval = TimeAmount.milliseconds(50)

    init(store: RedisClient, route: String) {
        self.store = store
        self.route = route
    }

    /// The store's key of `key`: `<key_prefix>cache:<route>:<target>`, then
    /// each key field, a line each (neither can hold a line break); its lock's
    /// is the same under `cache-lock:`, so that no client's target names
    /// another key's lock (a `:lock` suffix would: `/x:lock`).
    static func storeKey(keyPrefix: String, route: String, _ key: ResponseCache.Key, lock: Bool = false) -> String {
        (["\(keyPrefix)\(lock ? "cache-lock" : "cache"):\(route):\(key.target)"] + key.fields).joined(separator: "\n")
    }

    private func storeKeys(_ key: ResponseCache.Key) -> [String] {
        [false, true].map { Self.storeKey(keyPrefix: store.config.keyPrefix, route: route, key, lock: $0) }
    }

    enum Turn {
        /// A fresh answer another process stored.
        case have(StoredAnswer)
        /// The key's lock is this call's: it goes upstream and publishes.
        case fill
        /// Another process holds the lock.
        case wait
        /// The store did not answer: the local cache alone.
        case alone
        /// The store's value is no answer (why): the call goes upstream, and logs it.
        case refused(String)
    }

    /// {'have', value} when the value is fresh at ARGV[3]; else {'fill'} if the lock was free; else {'wait'}.
    private static let claim = RedisScript("""
        local value = redis.call('GET', KEYS[1])
        if value then
          local fresh = tonumber(string.match(value, '^(%d+)\\n'))
          if fresh and fresh > tonumber(ARGV[3]) then return {'have', value} end
        end
        if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return {'fill'} end
        return {'wait'}
        """)

    /// Stores a value (ARGV[1] empty: none) for ARGV[3] ms and releases the lock if ARGV[2] still holds it.
    private static let publish = RedisScript("""
        if ARGV[1] ~= '' then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3]) end
        if ARGV[2] ~= '' and redis.call('GET', KEYS[2]) == ARGV[2] then redis.call('DEL', KEYS[2]) end
        return 1
        """)

    /// Asks for `key`'s answer at `now`, or its lock (`lock`, held `lockTime` at most).
    func claim(_ key: ResponseCache.Key, lock: String, lockTime: Duration, now: Int64, route: RouteCacheConfig,
               maxEntryBytes: Int) -> EventLoopFuture<Turn> {
        let keys = storeKeys(key)
        let milliseconds = String(max(1, Int(lockTime.seconds * 1000)))
        return Self.claim.run(on: store, keys: keys, arguments: [lock, milliseconds, String(now)])
            .map { reply in Self.turn(from: reply, now: now, route: route, maxEntryBytes: maxEntryBytes) }
            .recover { _ in .alone }
    }

    /// Publishes `answer` (nil: nothing) and releases `lock` (empty: none held). Nobody waits for it.
    func publish(_ key: ResponseCache.Key, _ answer: StoredAnswer?, lock: String, now: Int64) {
        var value = ""
        var kept: Int64 = 1
        if let answer {
            let encoded = Self.encode(answer, now: now)
            if encoded.utf8.count <= Self.maxValueBytes {
                value = encoded
                let usable = answer.ttl(now: now) + max(answer.staleWhileRevalidate, answer.staleIfError)
                kept = min(max(usable, 1), Self.maxKept)
            }
        }
        guard !value.isEmpty || !lock.isEmpty else { return }
        _ = Self.publish.run(on: store, keys: storeKeys(key), arguments: [value, lock, String(kept * 1000)])
    }

    /// The claim script's reply read.
    static func turn(from reply: RedisValue, now: Int64, route: RouteCacheConfig, maxEntryBytes: Int) -> Turn {
        guard case .array(let parts) = reply, case .string(let word)? = parts.first else { return .alone }
        switch (String(decoding: word, as: UTF8.self), parts.count) {
        case ("have", 2):
            guard case .string(let bytes) = parts[1] else { return .refused("not a string") }
            return decode(bytes, now: now, route: route, maxEntryBytes: maxEntryBytes).map(Turn.have) ?? .refused("not a stored answer")
        case ("fill", 1): return .fill
        case ("wait", 1): return .wait
        default: return .alone
        }
    }

    // MARK: The value

    static func encode(_ answer: StoredAnswer, now: Int64) -> String {
        let freshUntil = now + max(0, answer.ttl(now: now))
        let document = JSONValue.object(JSONObject([
            "status": .number(String(answer.status)),
            "stored_at": .number(String(answer.storedAt)),
            "age": .number(String(answer.initialAge)),
            "vary": .array(answer.vary.map { .array([.string($0.name), $0.value.map(JSONValue.string) ?? .null]) }),
            "headers": .array(answer.headers.map { .array([.string($0.name), .string($0.value)]) }),
            "body": .string(Base64.encode(answer.body)),
        ]))
        return "\(freshUntil)\n" + JSONWriter.string(document)
    }

    /// Most fields a stored answer may carry.
    static let maxFields = 100

    /// A value read back, checked field by field (nil: it is no answer this process would have stored).
    static func decode(_ bytes: [UInt8], now: Int64, route: RouteCacheConfig, maxEntryBytes: Int) -> StoredAnswer? {
        guard bytes.count <= maxValueBytes, let newline = bytes.firstIndex(of: UInt8(ascii: "\n")), newline <= 20,
            bytes[..<newline].allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            case .object(let object)? = try? JSONReader.parse(Array(bytes[(newline + 1)...]), maxDepth: 4),
            case .number(let statusText)? = object["status"], let status = Int(statusText), (200...599).contains(status),
            case .number(let storedText)? = object["stored_at"], let storedAt = Int64(storedText),
            case .number(let ageText)? = object["age"], let age = Int64(ageText), (0...Int64(Int32.max)).contains(age),
            case .array(let fieldList)? = object["headers"], fieldList.count <= maxFields,
            case .array(let varyList)? = object["vary"], varyList.count <= maxFields,
            case .string(let encodedBody)? = object["body"], encodedBody.utf8.count <= (maxEntryBytes + 2) / 3 * 4,
            let body = Base64.decode(encodedBody)
        else { return nil }
        var headers = HeaderList()
        for field in fieldList {
            guard case .array(let pair) = field, pair.count == 2, case .string(let name) = pair[0], case .string(let value) = pair[1],
                HeaderList.isValidName(name), HeaderList.isValidValue(value), !StoredAnswer.perCall(name)
            else { return nil }
            headers.add(name, value)
        }
        var vary: [(name: String, value: String?)] = []
        for entry in varyList {
            guard case .array(let pair) = entry, pair.count == 2, case .string(let name) = pair[0], HeaderList.isValidName(name) else { return nil }
            switch pair[1] {
            case .string(let value) where HeaderList.isValidValue(value): vary.append((name, value))
            case .null: vary.append((name, nil))
            default: return nil
            }
        }
        // Its freshness made again from its own fields under this route's config; a time to come is now.
        let at = min(max(storedAt, 0), now)
        headers.add("Age", String(age))
        guard case .store(var answer) = StoredAnswer.make(status: status, headers: headers, body: body, request: [:], authorized: false,
                                                           route: route, requestedAt: at, now: at),
            answer.bytes <= maxEntryBytes, answer.vary.map(\.name) == vary.map(\.name)
        else { return nil }
        answer.vary = vary
        return answer
    }
}
