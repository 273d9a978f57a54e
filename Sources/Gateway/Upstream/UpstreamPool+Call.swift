import NIOCore

extension UpstreamPool {
    /// A call's try, on an endpoint the upstream's balance picks (another
    /// than the last try's, when one may take it): an idle pooled connection
    /// at once (no waiter closure to allocate), else `runner` hears back
    /// with the try's `token` when one is made or released, or the connect
    /// fails. Returns the circuit breaker that refused the try
    /// (`max_requests`) or its wait (`max_pending`): the call is answered 503
    /// at once instead of waiting for its deadline.
    func startTry(for call: Call, of state: UpstreamState, runner: ProxyHandler, token: ProxyHandler.CallMachine.Token) -> String? {
        if let breaker = state.breakerOpen(waiting: false) { return breaker }
        let endpoint = state.pick(exclude: call.endpoint?.index, random: runner.front.random.next())
        runner.front.tryStarted(call, on: endpoint)
        if let connection = takeIdle(endpoint, now: runner.now) {
            if !runner.connectionReady(connection, token) { connection.giveBack() }
            return nil
        }
        if let breaker = state.breakerOpen(waiting: true) { return breaker }
        call.enterPending(state)
        let acquisition = acquire(state.config, endpoint: endpoint) { [call] result in
            call.leavePending()
            switch result {
            case .success(let connection): return runner.connectionReady(connection, token)
            case .failure(let error): return runner.connectFailed(error as? UpstreamError ?? .connectFailure("\(error)"), token)
            }
        }
        switch acquisition {
        case .ready(let connection):
            call.leavePending()
            if !runner.connectionReady(connection, token) { connection.giveBack() }
        case .waiting(let waiter):
            if runner.machine.isCurrent(token) { call.waiter = waiter }
        }
        return nil
    }
}
