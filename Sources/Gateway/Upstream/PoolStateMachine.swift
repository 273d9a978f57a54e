import NIOCore

/// One upstream's HTTP/1.1 connections on one event loop, as a value (AHC's
/// `HTTPConnectionPool+HTTP1StateMachine` shape): events in, actions out, no
/// I/O. A waiter whose call ended leaves the queue at once; a freed
/// connection goes to the next waiter in a loop of the caller's, never
/// through a chain of callbacks that recurses per waiter.
struct PoolStateMachine<Connection: AnyObject, Waiter> {
    struct WaiterID: Hashable { let value: UInt64 }

    enum AcquireAction {
        case use(Connection)
        /// Open a new connection (counted as open from now on).
        case connect
        /// Wait; `cancel(_:)` with this id when the call ends first.
        case wait(WaiterID)
    }

    enum ReleaseAction {
        case handOver(Connection, to: Waiter)
        case park
        case close(Connection)
    }

    let limit: Int
    private(set) var open = 0
    /// Idle connections, the most recently parked last, with when they were parked.
    private var idle: [(connection: Connection, since: NIODeadline)] = []
    private var order = CircularBuffer<WaiterID>()
    private var waiting: [WaiterID: Waiter] = [:]
    private var nextID: UInt64 = 0
    /// A reload replaced this pool: nothing new is kept for reuse.
    private(set) var retired = false

    init(limit: Int) { self.limit = max(1, limit) }

    var waiters: Int { waiting.count }
    var idleCount: Int { idle.count }

    /// The most recently parked connection that `usable` accepts and that has
    /// not been idle `idleTimeout` or longer; those passed over are returned
    /// in `stale` for the caller to close.
    mutating func takeIdle(now: NIODeadline, idleTimeout: TimeAmount, stale: inout [Connection],
                           usable: (Connection) -> Bool) -> Connection? {
        while let (connection, since) = idle.popLast() {
            if now - since < idleTimeout, usable(connection) { return connection }
            stale.append(connection)
        }
        return nil
    }

    mutating func acquire(_ waiter: Waiter, now: NIODeadline, idleTimeout: TimeAmount, stale: inout [Connection],
                          usable: (Connection) -> Bool) -> AcquireAction {
        if let connection = takeIdle(now: now, idleTimeout: idleTimeout, stale: &stale, usable: usable) { return .use(connection) }
        if open < limit {
            open += 1
            return .connect
        }
        nextID &+= 1
        let id = WaiterID(value: nextID)
        order.append(id)
        waiting[id] = waiter
        return .wait(id)
    }

    /// The waiter's call ended: it leaves the queue now. Returns whether it was still there.
    @discardableResult
    mutating func cancel(_ id: WaiterID) -> Bool {
        guard waiting.removeValue(forKey: id) != nil else { return false }
        // Cancelled ids are skipped when popped; compact when they dominate.
        if order.count > 2 * waiting.count + 16 { order = CircularBuffer(order.filter { waiting[$0] != nil }) }
        return true
    }

    private mutating func nextWaiter() -> Waiter? {
        while let id = order.popFirst() {
            if let waiter = waiting.removeValue(forKey: id) { return waiter }
        }
        return nil
    }

    /// A connection finished its exchange and can be reused.
    mutating func release(_ connection: Connection, now: NIODeadline) -> ReleaseAction {
        if retired { return .close(connection) }
        if let waiter = nextWaiter() { return .handOver(connection, to: waiter) }
        idle.append((connection, now))
        return .park
    }

    /// A connection closed (or failed to open). When someone waits, that
    /// waiter may open a connection of its own: returned, counted as open.
    mutating func closed(_ connection: Connection?) -> Waiter? {
        if let connection { idle.removeAll { $0.connection === connection } }
        open -= 1
        guard let waiter = nextWaiter() else { return nil }
        open += 1
        return waiter
    }

    /// A new connection for a waiter or acquirer could not be opened.
    mutating func connectFailed() { open -= 1 }

    /// Idle connections parked at `before` or earlier: removed, for the caller to close.
    mutating func expire(before: NIODeadline) -> [Connection] {
        let expired = idle.filter { $0.since <= before }.map(\.connection)
        idle.removeAll { $0.since <= before }
        return expired
    }

    /// A reload replaced the pool: idle connections are returned to close,
    /// busy ones close when released.
    mutating func retire() -> [Connection] {
        retired = true
        defer { idle = [] }
        return idle.map(\.connection)
    }
}
