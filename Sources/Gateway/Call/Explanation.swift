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
        var random = SplitMix64(seed: UInt64.random(in: 0 ... .max))
        // A fresh router: offline, every rate limit's bucket is full. The client is an HTTP/1.1 one, which can tunnel.
        let side = CallAdmission.Client(address: client.address, localAuthority: listener?.address.description ?? "", canTunnel: true,
                                        framing: body.isEmpty ? .none : .length(body.count))
        let admitted: CallAdmission.Admitted
        switch CallAdmission.admit(&head, client: side, config: config, router: Router(config: config), random: &random, now: 0).decision {
        case .answered(let problem, let extraHeaders, _, _): return .answered(problem, headers: extraHeaders)
        case .admitted(let decided): admitted = decided
        }
        let route = admitted.match.route
        do {
            let request = try CallAdmission.upstreamRequest(admitted, method: method, target: head.uri, headers: head.headers, body: body,
                                                            client: client)
            return .forwarded(route: route.config.name, index: admitted.match.index, upstream: route.upstream.name,
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
