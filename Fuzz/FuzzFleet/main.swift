// libFuzzer entry: the fleet code fed a store that answers what it likes.
// The input's first bytes choose a lease's size and rate; the rest is RESP,
// read by hiredis's reader, each reply handed to the lease's refill (as the
// rate-limit script's answer) and to the credential claim (as its answer),
// between calls taken on the lease, and to the fleet cache's claim (as its
// answer). Nothing may trap, a lease never holds more than it asked for, no
// credential taken is an invalid header value, and a cached answer taken is
// one this process could have stored, which reads back the same once written.
import Rewriter
@testable import Gateway

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let input = Array(UnsafeRawBufferPointer(start: start, count: count))
    guard input.count >= 2 else { return 0 }
    let size = Int(input[0] % 32) + 1, rate = Double(input[1] % 100) + 0.5
    let reader = RedisReader()
    var replies: [RedisValue] = []
    do {
        try input.dropFirst(2).withUnsafeBytes { try reader.feed($0) }
        while let reply = try reader.next() { replies.append(reply) }
    } catch {
        return 0
    }
    var lease = FleetLease(now: 0)
    var now = 0.0, id: UInt64 = 0
    for reply in replies {
        // A few calls, then the reply answers the refill out, if any.
        for _ in 0..<3 {
            id += 1
            _ = lease.take(now: now, size: size, rate: rate, nextID: id, mayWait: id % 2 == 0)
        }
        if let refill = lease.inFlight {
            if let (got, wait) = FleetRateLimit.grant(from: reply) {
                lease.granted(refill, got: got, wait: wait, now: now)
            } else {
                lease.failed(refill)
            }
        }
        precondition(lease.tokens <= 2 * size, "a lease holds more than it asked for: \(lease.tokens) of \(size)")
        precondition(lease.credit <= size, "credit past one lease")
        now += 0.25
        if case .have(let value) = FleetCredential.turn(from: reply) {
            precondition(HeaderList.isValidValue(value) && value.utf8.count <= FleetCredential.maxValueBytes, "a credential no header may carry")
        }
        if case .have(let answer) = FleetCache.turn(from: reply, now: 1_800_000_000, route: route, maxEntryBytes: 4096) { check(answer) }
    }
    // The input itself as a stored value.
    if let answer = FleetCache.decode(Array(input.dropFirst(2)), now: 1_800_000_000, route: route, maxEntryBytes: 4096) { check(answer) }
    return 0
}

let route = RouteCacheConfig()

/// A cached answer from the store: fields any upstream's would pass, bounded, and the same once written and read again.
func check(_ answer: StoredAnswer) {
    precondition((200...599).contains(answer.status) && answer.body.count <= 4096, "an answer past its bounds")
    precondition(answer.headers.allSatisfy { HeaderList.isValidName($0.name) && HeaderList.isValidValue($0.value) }, "a field no header may carry")
    precondition(answer.age(now: 1_800_000_000) >= 0 && answer.storedAt <= 1_800_000_000, "an answer from the future")
    let text = FleetCache.encode(answer, now: 1_800_000_000)
    guard let again = FleetCache.decode(Array(text.utf8), now: 1_800_000_000, route: route, maxEntryBytes: 4096) else {
        preconditionFailure("a stored answer does not read back: \(text)")
    }
    precondition(again.status == answer.status && again.headers.map(\.name) == answer.headers.map(\.name)
                 && again.headers.map(\.value) == answer.headers.map(\.value) && again.body == answer.body
                 && again.initialAge == answer.initialAge && again.storedAt == answer.storedAt, "a stored answer reads back otherwise")
}
