import CHiredis

/// hiredis's reply reader fed from a channel (no I/O of its own), bounded
/// against a hostile server: at most `maxBuffered` unparsed bytes, arrays of
/// at most `maxElements` and strings of at most `maxBuffered` bytes; past any
/// of them it fails instead of allocating.
final class RedisReader {
    static let maxBuffered = 1 << 20
    static let maxElements: Int32 = 1024

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private let reader: UnsafeMutablePointer<redisReader>

    init() {
        reader = redisReaderCreateWithFunctions(boundedReplyFunctions)
    }

    deinit { redisReaderFree(reader) }

    func feed(_ bytes: UnsafeRawBufferPointer) throws(Failure) {
        guard !bytes.isEmpty else { return }
        let fed = redisReaderFeed(reader, bytes.baseAddress!.assumingMemoryBound(to: CChar.self), bytes.count)
        guard fed == REDIS_OK else { throw failure }
        guard reader.pointee.len - reader.pointee.pos <= Self.maxBuffered else {
            throw Failure(description: "a reply larger than \(Self.maxBuffered) bytes")
        }
    }

    /// The next whole reply, or nil until more bytes come.
    func next() throws(Failure) -> RedisValue? {
        var reply: UnsafeMutableRawPointer?
        guard redisReaderGetReply(reader, &reply) == REDIS_OK else { throw failure }
        guard let reply else { return nil }
        defer { freeReplyObject(reply) }
        return Self.value(reply.assumingMemoryBound(to: redisReply.self))
    }

    private var failure: Failure {
        Failure(description: withUnsafeBytes(of: reader.pointee.errstr) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) })
    }

    private static func value(_ reply: UnsafeMutablePointer<redisReply>) -> RedisValue {
        let r = reply.pointee
        let text = { UnsafeRawBufferPointer(start: r.str, count: r.len) }
        switch r.type {
        case REDIS_REPLY_STRING: return .string(Array(text()))
        case REDIS_REPLY_STATUS: return .status(String(decoding: text(), as: UTF8.self))
        case REDIS_REPLY_ERROR: return .error(String(decoding: text(), as: UTF8.self))
        case REDIS_REPLY_INTEGER: return .integer(r.integer)
        case REDIS_REPLY_ARRAY: return .array((0..<r.elements).map { value(r.element[$0]!) })
        default: return .null
        }
    }
}

/// hiredis's own reply constructors, refusing what is past the reader's
/// bounds (a NULL object is the reader's out-of-memory error).
private let defaultReplyFunctions: redisReplyObjectFunctions = {
    let reader = redisReaderCreate()!
    defer { redisReaderFree(reader) }
    return reader.pointee.fn.pointee
}()

private nonisolated(unsafe) let boundedReplyFunctions: UnsafeMutablePointer<redisReplyObjectFunctions> = {
    let functions = UnsafeMutablePointer<redisReplyObjectFunctions>.allocate(capacity: 1)
    var bounded = defaultReplyFunctions
    bounded.createArray = { task, count in
        count > RedisReader.maxElements ? nil : defaultReplyFunctions.createArray(task, count)
    }
    bounded.createString = { task, text, count in
        count > RedisReader.maxBuffered ? nil : defaultReplyFunctions.createString(task, text, count)
    }
    functions.initialize(to: bounded)
    return functions
}()
