/// What every connection of one listener shares: immutable config, the
/// router built from it, and the per-loop upstream pools.
final class ListenerContext: Sendable {
    let config: GatewayConfig
    let router: Router
    let pools: UpstreamPools
    /// `http` or `https`: what X-Forwarded-Proto says.
    let scheme: String

    init(config: GatewayConfig, router: Router, pools: UpstreamPools, scheme: String) {
        self.config = config
        self.router = router
        self.pools = pools
        self.scheme = scheme
    }
}
