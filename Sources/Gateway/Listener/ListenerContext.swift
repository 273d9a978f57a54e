/// What every connection of one listener shares: immutable config, the
/// router built from it, the per-loop upstream pools, the embedder's hooks.
final class ListenerContext: Sendable {
    let config: GatewayConfig
    let router: Router
    let pools: UpstreamPools
    let modifiers: [any RequestModifier]
    let validators: [any ResponseValidator]
    let accessLog: AccessLog
    let metrics: GatewayMetrics
    /// `http` or `https`: what X-Forwarded-Proto says.
    let scheme: String

    init(config: GatewayConfig, router: Router, pools: UpstreamPools, modifiers: [any RequestModifier],
         validators: [any ResponseValidator], accessLog: AccessLog, metrics: GatewayMetrics, scheme: String) {
        self.metrics = metrics
        self.validators = validators
        self.config = config
        self.router = router
        self.pools = pools
        self.modifiers = modifiers
        self.accessLog = accessLog
        self.scheme = scheme
    }
}
