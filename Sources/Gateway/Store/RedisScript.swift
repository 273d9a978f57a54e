import NIOCore
import Synchronization

/// A Lua script the store runs atomically: by its SHA once the server has
/// it (`EVALSHA`), whole (`EVAL`) before that and after a `NOSCRIPT` (the
/// server restarted or was flushed), loading it again for the next calls.
final class RedisScript: Sendable {
    let source: String
    private let sha = Mutex<String?>(nil)

    init(_ source: String) { self.source = source }

    func run(on store: RedisClient, keys: [String], arguments: [String]) -> EventLoopFuture<RedisValue> {
        let tail = [String(keys.count)] + keys + arguments
        guard let sha = sha.withLock({ $0 }) else {
            store.send(["SCRIPT", "LOAD", source]).whenSuccess { reply in
                if case .string(let bytes) = reply { self.sha.withLock { $0 = String(decoding: bytes, as: UTF8.self) } }
            }
            return store.send(["EVAL", source] + tail)
        }
        return store.send(["EVALSHA", sha] + tail).flatMap { reply in
            guard case .error(let message) = reply, message.hasPrefix("NOSCRIPT") else { return store.eventLoop.makeSucceededFuture(reply) }
            self.sha.withLock { if $0 == sha { $0 = nil } }
            return self.run(on: store, keys: keys, arguments: arguments)
        }
    }
}
