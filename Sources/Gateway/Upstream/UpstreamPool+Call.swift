import NIOCore

extension UpstreamPool {
    /// A connection for a call's try on `endpoint`: an idle pooled one at
    /// once (no waiter closure to allocate), else `runner` hears back with
    /// the try's `token` when one is made or released, or the connect fails.
    /// Returns the circuit breaker that refused the wait (`max_pending`).
    func connection(for call: Call, to endpoint: Endpoint, of state: UpstreamState, now: NIODeadline, runner: CallRunner,
                 token: CallRunner.CallMachine.Token) -> String? {
        if let connection = takeIdle(endpoint, now: now) {
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
            if runner.isCurrent(token) { call.waiter = waiter }
        }
        return nil
    }
}
