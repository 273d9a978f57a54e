import NIOCore
import Testing
@testable import Gateway

/// The pool's decisions without sockets: cancelled waiters leave at once,
/// a freed connection goes to the next live waiter, idle ones expire.
@Suite(.ownThreads) struct PoolStateMachineTests {
    final class Connection {}
    typealias Machine = PoolStateMachine<Connection, String>

    let now = NIODeadline.uptimeNanoseconds(1_000_000_000)
    let idleTimeout = TimeAmount.seconds(4)

    func acquire(_ machine: inout Machine, _ waiter: String, at time: NIODeadline? = nil) -> Machine.AcquireAction {
        var stale: [Connection] = []
        return machine.acquire(waiter, now: time ?? now, idleTimeout: idleTimeout, stale: &stale) { _ in true }
    }

    @Test func waitersBeyondTheLimitQueueAndCancelledOnesNeverGetAConnection() {
        var machine = Machine(limit: 1)
        guard case .connect = acquire(&machine, "a") else { Issue.record("the first opens"); return }
        var ids: [Machine.WaiterID] = []
        for n in 0..<10_000 {
            guard case .wait(let id) = acquire(&machine, "w\(n)") else { Issue.record("over the limit: waits"); return }
            ids.append(id)
        }
        // Every waiter but the last is reset (HTTP/2 rapid reset): they leave at once.
        for id in ids.dropLast() {
            let cancelled = machine.cancel(id)
            #expect(cancelled)
        }
        #expect(machine.waiters == 1)
        let again = machine.cancel(ids[0])
        #expect(!again)
        let connection = Connection()
        guard case .handOver(let handed, let waiter) = machine.release(connection, now: now) else { Issue.record("handed over"); return }
        #expect(handed === connection && waiter == "w9999")
        // Nobody waits any more: the next release parks it.
        guard case .park = machine.release(connection, now: now) else { Issue.record("parked"); return }
        #expect(machine.idleCount == 1)
    }

    @Test func aDeclinedConnectionGoesToTheNextWaiterInOrder() {
        var machine = Machine(limit: 1)
        _ = acquire(&machine, "a")
        _ = acquire(&machine, "b")
        _ = acquire(&machine, "c")
        let connection = Connection()
        guard case .handOver(_, "b") = machine.release(connection, now: now) else { Issue.record("b first"); return }
        // Not taken (b's call had ended meanwhile): released again, it goes to the next.
        guard case .handOver(_, "c") = machine.release(connection, now: now) else { Issue.record("then c"); return }
        guard case .park = machine.release(connection, now: now) else { Issue.record("then parked"); return }
    }

    @Test func idleConnectionsExpireAndAreNotReusedPastTheirTimeout() {
        var machine = Machine(limit: 2)
        _ = acquire(&machine, "a")
        let old = Connection()
        _ = machine.release(old, now: now)
        var stale: [Connection] = []
        let later = now + .seconds(5)
        guard case .connect = machine.acquire("b", now: later, idleTimeout: idleTimeout, stale: &stale, usable: { _ in true }) else {
            Issue.record("an expired idle connection is not reused")
            return
        }
        #expect(stale.count == 1 && stale[0] === old)
        let fresh = Connection()
        _ = machine.release(fresh, now: later)
        let notYet = machine.expire(before: later - .seconds(1))
        #expect(notYet.isEmpty)
        let expired = machine.expire(before: later)
        #expect(expired.first === fresh)
    }

    @Test func aClosedConnectionLetsAWaiterOpenItsOwn() {
        var machine = Machine(limit: 1)
        let connection = Connection()
        _ = acquire(&machine, "a")
        _ = acquire(&machine, "b")
        let next = machine.closed(connection)
        #expect(next == "b")
        #expect(machine.open == 1)
        let none = machine.closed(nil)
        #expect(none == nil)
        #expect(machine.open == 0)
    }

    @Test func aRetiredPoolClosesWhatIsReleased() {
        var machine = Machine(limit: 1)
        _ = acquire(&machine, "a")
        let idle = Connection()
        _ = machine.release(idle, now: now)
        let closing = machine.retire()
        #expect(closing.first === idle)
        guard case .close = machine.release(Connection(), now: now) else { Issue.record("closed"); return }
    }
}

/// An HTTP/2 endpoint's one session, without sockets.
@Suite struct HTTP2PoolStateMachineTests {
    final class Session {
        var acceptsStreams = true
    }
    typealias Machine = HTTP2PoolStateMachine<Session, String>

    @Test func callsWaitForOneConnectAndAGoAwayMakesTheNextCallReplaceIt() {
        var machine = Machine()
        guard case .connect(let first) = machine.acquire("a", accepts: \.acceptsStreams) else { Issue.record("connects"); return }
        guard case .wait = machine.acquire("b", accepts: \.acceptsStreams) else { Issue.record("waits"); return }
        let session = Session()
        #expect(machine.connected(session, attempt: first) == ["a", "b"])
        guard case .use(let used) = machine.acquire("c", accepts: \.acceptsStreams), used === session else { Issue.record("uses"); return }
        // GOAWAY: no new stream on it; the next call opens the replacement.
        session.acceptsStreams = false
        guard case .connect(let second) = machine.acquire("d", accepts: \.acceptsStreams), second != first else {
            Issue.record("replaces"); return
        }
        // A late result of the first attempt changes nothing.
        #expect(machine.connectFailed(attempt: first).isEmpty)
        #expect(machine.connectFailed(attempt: second) == ["d"])
        guard case .connect = machine.acquire("e", accepts: \.acceptsStreams) else { Issue.record("connects again"); return }
    }

    @Test func aClosedSessionIsConnectedAnew() {
        var machine = Machine()
        guard case .connect(let attempt) = machine.acquire("a", accepts: \.acceptsStreams) else { Issue.record("connects"); return }
        let session = Session()
        _ = machine.connected(session, attempt: attempt)
        machine.closed(Session())  // another session's close: nothing
        guard case .use = machine.acquire("b", accepts: \.acceptsStreams) else { Issue.record("uses"); return }
        machine.closed(session)
        guard case .connect = machine.acquire("c", accepts: \.acceptsStreams) else { Issue.record("connects anew"); return }
    }
}
