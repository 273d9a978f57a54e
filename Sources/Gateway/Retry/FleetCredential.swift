import NIOCore
import Rewriter

/// `refresh: {share: fleet}`: one credential for every gatewayd on the
/// store. A process that needs a newer credential than the one it used
/// takes the one another process stored, if there is one; else it takes
/// the fleet's lock (for `lockTime`) and refreshes, storing the result; else
/// it waits, asking again every 50 ms, for the holder's result. With the
/// store down it refreshes alone, as with `share: local`. The credential is
/// kept in the store for a day under `<key_prefix>cred:<route>:<n>`.
struct FleetCredential: Sendable {
    let store: RedisClient
    let key: String

    static let lockTime = Duration.seconds(10)
    static let kept = Duration.seconds(86_400)
    /// The longest credential taken from the store (a header value past it is no credential).
    static let maxValueBytes = 8192

    /// {'have', credential} | {'refresh'} (the lock is this caller's) | {'wait'}.
    private static let claim = RedisScript("""
        local current = redis.call('GET', KEYS[1])
        if current and current ~= ARGV[1] then return {'have', current} end
        if redis.call('SET', KEYS[2], ARGV[2], 'NX', 'PX', ARGV[3]) then return {'refresh'} end
        return {'wait'}
        """)

    /// Stores a credential (ARGV[1] empty: none, after a failed refresh) and releases the lock if still held.
    private static let publish = RedisScript("""
        if ARGV[1] ~= '' then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3]) end
        if redis.call('GET', KEYS[2]) == ARGV[2] then redis.call('DEL', KEYS[2]) end
        return 1
        """)

    enum Turn: Equatable {
        case have(String)
        case refresh
        case wait
        /// The store did not answer: this process refreshes alone.
        case alone
        /// The store's credential is no header value (`bytes` long): refreshed alone, logged.
        case refused(bytes: Int)
    }

    /// The claim script's reply read: whoever can write the key wrote the
    /// credential, so it is checked as a captured value is.
    static func turn(from reply: RedisValue) -> Turn {
        guard case .array(let parts) = reply, case .string(let word)? = parts.first else { return .alone }
        switch (String(decoding: word, as: UTF8.self), parts.count) {
        case ("have", 2):
            guard case .string(let bytes) = parts[1] else { return .alone }
            let value = String(decoding: bytes, as: UTF8.self)
            guard bytes.count <= maxValueBytes, HeaderList.isValidValue(value) else { return .refused(bytes: bytes.count) }
            return .have(value)
        case ("refresh", 1): return .refresh
        case ("wait", 1): return .wait
        default: return .alone
        }
    }

    /// The credential newer than `used` (nil: none yet), by the fleet's
    /// turn; `perform` is the refresh call, run on `loop`.
    func refresh(after used: String?, on loop: any EventLoop, perform: @escaping () -> EventLoopFuture<String>) -> EventLoopFuture<String> {
        let perform = NIOLoopBound(perform, eventLoop: loop)
        let lock = String(UInt64.random(in: 1...UInt64.max), radix: 16)
        let keys = [key, key + ":lock"]
        let deadline = NIODeadline.now() + Self.lockTime.timeAmount
        let (lockMs, keptMs) = (String(Int(Self.lockTime.seconds * 1000)), String(Int(Self.kept.seconds * 1000)))
        @Sendable func ask() -> EventLoopFuture<String> {
            Self.claim.run(on: store, keys: keys, arguments: [used ?? "", lock, lockMs]).hop(to: loop)
                .map { reply in
                    let turn = Self.turn(from: reply)
                    if case .refused(let bytes) = turn {
                        store.logger.error("store: the fleet's credential under \(keys[0]) is not a valid header value; refreshing here instead",
                                           metadata: ["bytes": .stringConvertible(bytes)])
                    }
                    return turn
                }
                .recover { _ in .alone }
                .flatMap { turn in
                    switch turn {
                    case .have(let value):
                        return loop.makeSucceededFuture(value)
                    case .wait where NIODeadline.now() < deadline:
                        return loop.scheduleTask(in: .milliseconds(50)) {}.futureResult.flatMap { ask() }
                    case .wait, .alone, .refused:
                        return perform.value()
                    case .refresh:
                        let refreshed = perform.value()
                        refreshed.whenComplete { result in
                            let value = (try? result.get()) ?? ""
                            _ = Self.publish.run(on: store, keys: keys, arguments: [value, lock, keptMs])
                        }
                        return refreshed
                    }
                }
        }
        return ask()
    }
}
