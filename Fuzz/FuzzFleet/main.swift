// libFuzzer entry: the fleet code fed a store that answers what it likes.
// The input's first bytes choose a lease's size and rate; the rest is RESP,
// read by hiredis's reader, each reply handed to the lease's refill (as the
// rate-limit script's answer) and to the credential claim (as its answer),
// between calls taken on the lease. Nothing may trap, a lease never holds
// more than it asked for, and no credential taken is an invalid header value.
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
    }
    return 0
}
