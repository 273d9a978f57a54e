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

/// The route's `refresh` action started for a refused try: a newer
/// credential, the one refresh under way, or a new one through the pool.
extension ClientExchange {
    /// Nil when the route has no such refresher, or when `min_interval` caps
    /// it (then the refused answer goes through). Otherwise the refused try
    /// is over (its span ended), and a newer credential, or the one refresh
    /// under way, comes before the next; a failed refresh fails the call with 502.
    func startRefresh(_ spec: RefreshSpec, for call: Call) -> (CredentialRefresher, CredentialRefresher.Start)? {
        record.spans?.tryEnded(now: now, sink: loopContext.spanSink)
        let route = call.route
        guard let index = route.refreshers.firstIndex(where: { $0.spec == spec }) else { return nil }
        let refresher = route.refreshers[index]
        let timeout = route.config.retry?.perTryTimeout ?? route.config.timeout ?? CallRunner.defaultTimeout
        let start = refresher.refresh(after: call.credentials[index], through: loopContext.pool, timeout: timeout,
                                      maxBodyBytes: listener.config.limits.maxRefreshBodyBytes, metrics: route.metrics,
                                      traced: record.spans?.refresh(method: spec.method, upstream: refresher.upstream, random: &random),
                                      sink: loopContext.spanSink)
        route.metrics.refresh(start)
        guard case .throttled = start else {
            record.log.upstreamStatus = nil
            return (refresher, start)
        }
        listener.logger.warning("refresh skipped: min_interval not passed", metadata: ["route": .string(route.config.name)])
        return nil
    }
}
