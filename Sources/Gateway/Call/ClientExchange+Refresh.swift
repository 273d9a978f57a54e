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
