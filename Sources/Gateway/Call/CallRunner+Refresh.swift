import Rewriter

/// A credential refresh a validator asked for: started (or joined) for the
/// call's try, which follows it once the credential is there.
extension CallRunner {
    /// The refresher behind `spec` starts (or joins) a refresh; the try `token` follows it.
    func refresh(_ spec: RefreshSpec, token: CallMachine.Token, head: consuming ResponseHead?) {
        guard let call else { return }
        guard let (refresher, start) = downstream.startRefresh(spec, for: call) else { return run(machine.refreshUnavailable(token), head: head.take()) }
        call.dropConnection()
        guard case .wait(let credential) = start else { return run(machine.credentialReady(token)) }
        credential.assumeIsolated().whenComplete { [self] result in
            guard case .failure(let error) = result else { return run(machine.credentialReady(token)) }
            run(machine.credentialFailed(token, .refreshFailed(upstream: refresher.upstream.name, error: error, route: call.route.config.name)))
        }
    }
}
