import NIOCore

/// What waits for a pooled connection for one try, told with the try's
/// token when a connection is made or released, or the connect fails. The
/// pool knows nothing of the call behind it.
protocol PoolWaiter: AnyObject {
    associatedtype Token
    /// Whether the try took the connection (false: its try is over, the connection goes to someone else).
    func connectionReady(_ connection: any UpstreamConnection, _ token: Token) -> Bool
    /// The connect failed; false when the try was over already.
    func connectFailed(_ error: UpstreamError, _ token: Token) -> Bool
    /// The try waits: counted among `state`'s pending calls until `waitEnded`.
    func waits(on state: UpstreamState, _ token: Token)
    /// Its place in the endpoint's queue (nil: an HTTP/2 session's waiters are not cancelled one by one).
    func queued(_ id: UpstreamPool.WaiterID?, _ token: Token)
    func waitEnded(_ token: Token)
}

extension UpstreamPool {
    /// A connection for a try on `endpoint`: an idle pooled one at once (no
    /// waiter closure to allocate), else `waiter` hears back with the try's
    /// `token`. Returns the circuit breaker that refused the wait
    /// (`max_pending`; not asked when `limited` is false: the gateway's own calls).
    func connection<Waiter: PoolWaiter>(to endpoint: Endpoint, of state: UpstreamState, now: NIODeadline, for waiter: Waiter,
                                        token: Waiter.Token, limited: Bool = true) -> String? {
        if let connection = takeIdle(endpoint, now: now) {
            if !waiter.connectionReady(connection, token) { connection.giveBack() }
            return nil
        }
        if limited, let breaker = state.breakerOpen(waiting: true) { return breaker }
        waiter.waits(on: state, token)
        let acquisition = acquire(state.config, endpoint: endpoint) { result in
            waiter.waitEnded(token)
            switch result {
            case .success(let connection): return waiter.connectionReady(connection, token)
            case .failure(let error): return waiter.connectFailed(error as? UpstreamError ?? .connectFailure("\(error)"), token)
            }
        }
        switch acquisition {
        case .ready(let connection):
            waiter.waitEnded(token)
            if !waiter.connectionReady(connection, token) { connection.giveBack() }
        case .waiting(let id):
            waiter.queued(id, token)
        }
        return nil
    }
}
