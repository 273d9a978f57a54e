import NIOHTTP1
import Rewriter

/// `gatewayd explain`: one request through the daemon's own steps — the
/// checks and normalisation before routing, the route, the translation, the
/// forwarding fields — up to the bytes the upstream would receive, without
/// sending them. As if the client connected to the first listener.
public enum Explanation {
    public enum Outcome: Sendable {
        /// What the upstream would receive, and how it was chosen.
        case forwarded(route: String, index: Int, upstream: String, upstreamDescription: String, request: [UInt8])
        /// The gateway would answer the call itself (`headers`: beside the problem's own, e.g. a 405's Allow).
        case answered(Problem, headers: HeaderList = [:])
    }

    public static func explain(method: String, target: String, headers: HeaderList, body: [UInt8], config: GatewayConfig,
                               client: ClientInfo) -> Outcome {
        let listener = config.listeners.first
        var head = RequestHead(method: HTTPMethod(rawValue: method), uri: target, version: .http1_1, headers: headers)
        if !head.headers.contains("Host") { head.headers.add("Host", listener?.address.description ?? "localhost") }
        // The daemon's order: trace context first (its fields count towards the head's size), then routing.
        var random = SplitMix64(seed: UInt64.random(in: 0 ... .max))
        _ = CallTrace.apply(&head.headers, config: config.tracing, random: &random)
        let match: Router.Match
        switch RequestRouting.route(&head, limits: config.limits, localAuthority: listener?.address.description ?? "",
                                    router: Router(config: config)) {
        case .refused(let problem, let extraHeaders, _): return .answered(problem, headers: extraHeaders)
        case .routed(let routed, _): match = routed
        }
        let route = match.route
        // A rate limit is not asked: offline, every bucket is full. The client is an HTTP/1.1 one, which can tunnel.
        if let refusal = RequestRouting.upgradeRefusal(head.headers, route: route, canTunnel: true) { return .answered(refusal) }
        if !route.streamsBody(method: method), body.count > config.limits.maxBodyBytes {
            return .answered(.bodyTooLarge(limit: config.limits.maxBodyBytes, route: route.config.name))
        }
        do {
            var request = try UpstreamRequest.build(method: method, target: head.uri, headers: head.headers, body: body,
                                                    route: route.config, upstream: route.upstream, captures: match.captures,
                                                    client: client)
            if let upgrade = RequestRouting.upgradeAsked(head.headers) { request.askUpgrade(to: upgrade) }
            return .forwarded(route: route.config.name, index: match.index, upstream: route.upstream.name,
                              upstreamDescription: route.isEcho ? "built-in echo" : Self.endpoint(route.upstream),
                              request: request.wireFormat)
        } catch {
            return .answered(error)
        }
    }

    /// The endpoint a first call would go to, with every endpoint healthy
    /// (offline, nothing has been checked): the first by round robin, any by the others.
    static func endpoint(_ upstream: UpstreamConfig) -> String {
        let first = upstream.url!.description
        guard upstream.endpoints.count > 1 else { return first }
        let pick = upstream.balance == .roundRobin ? "endpoint 1" : "one endpoint at random"
        return "\(first): \(pick) of \(upstream.endpoints.count) by \(upstream.balance.rawValue)"
    }
}
