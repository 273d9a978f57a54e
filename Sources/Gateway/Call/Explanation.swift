import CoreMetrics
import Logging
import NIOHTTP1
import Rewriter

/// `gatewayd explain`: one request through the daemon's own steps — the
/// checks and normalisation before routing, the route, the translation, the
/// forwarding fields — up to the bytes the upstream would receive, without
/// sending them. As if the client connected to the first listener.
package enum Explanation {
    package enum Outcome: Sendable {
        /// What the upstream would receive, and how it was chosen; `notes`:
        /// what the route's filters did that cannot be shown offline.
        case forwarded(route: String, index: Int, upstream: String, upstreamDescription: String, request: [UInt8], notes: [String] = [])
        /// A filter would answer the client itself.
        case filterAnswered(filter: String, status: Int, headers: HeaderList, body: [UInt8])
        /// The gateway would answer the call itself (`headers`: beside the problem's own, e.g. a 405's Allow).
        case answered(Problem, headers: HeaderList = [:])
    }

    package static func explain(method: String, target: String, headers: HeaderList, body: [UInt8], config: GatewayConfig,
                               client: ClientInfo) -> Outcome {
        let listener = config.listeners.first
        var head = RequestHead(method: HTTPMethod(rawValue: method), uri: target, version: .http1_1, headers: headers)
        if !head.headers.contains("Host") { head.headers.add("Host", listener?.address.description ?? "localhost") }
        var random = SplitMix64(seed: UInt64.random(in: 0 ... .max))
        // A fresh router: offline, every rate limit's bucket is full. The client is an HTTP/1.1 one, which can tunnel.
        let trusted = listener?.trustedProxies ?? []
        let side = CallAdmission.Client(address: trusted.clientAddress(peer: client.address, forwardedFor: head.headers.values("X-Forwarded-For")),
                                        localAuthority: listener?.address.description ?? "", canTunnel: true,
                                        framing: body.isEmpty ? .none : .length(body.count))
        let admitted: CallAdmission.Admitted
        switch CallAdmission.admit(&head, client: side, tracing: config.tracing, limits: config.limits, router: Router(config: config), random: &random, now: 0).decision {
        case .answered(let problem, let extraHeaders, _, _): return .answered(problem, headers: extraHeaders)
        case .admitted(let decided): admitted = decided
        }
        let route = admitted.match.route
        var request: UpstreamRequest
        do {
            request = try CallAdmission.upstreamRequest(admitted, method: method, target: head.uri, headers: head.headers, body: body,
                                                        client: client)
        } catch {
            return .answered(error)
        }
        var notes: [String] = []
        if !route.filters.isEmpty {
            let info = FixedCallInfo(route: route.config.name, upstream: route.upstream.name, requestID: client.requestID,
                                      clientAddress: client.address, localAddress: side.localAuthority, scheme: client.scheme,
                                      proto: "HTTP/1.1", startNanos: FilterVM.wallClockNanos())
            switch runFilters(route.filters, on: &request, info: info, streams: admitted.streams) {
            case .forwarded(let said): notes = said
            case .answered(let outcome): return outcome
            }
        }
        if let cache = route.config.cache {
            notes.append(cacheNote(cache, route: route.config.name, method: head.method, target: head.uri, headers: request.headers, hasBody: !body.isEmpty,
                                   storePrefix: cache.scope == .fleet ? config.store?.keyPrefix : nil))
        }
        return .forwarded(route: route.config.name, index: admitted.match.index, upstream: route.upstream.name,
                          upstreamDescription: route.isEcho ? "built-in echo" : Self.endpoint(route.upstream), request: request.wireFormat,
                          notes: notes)
    }

    /// Each filter's VM for one explanation, started on first use.
    private final class OfflineVMs: FilterVMSource {
        let services: FilterServices
        private(set) var started: [String: FilterVM] = [:]
        /// Each failure, as the explanation's notes say it.
        private(set) var failures: [String] = []

        init(services: FilterServices) { self.services = services }

        func vm(_ filters: [FilterConfig], _ index: Int) throws(FilterFailure) -> FilterVM {
            if let vm = started[filters[index].name] { return vm }
            let vm = try FilterVM.start(filters[index], services: services)
            started[filters[index].name] = vm
            return vm
        }

        func failed(_ failure: FilterFailure, failedOpen: Bool, info: any FilterCallInfo) {
            failures.append(failedOpen ? "\(failure) (fail_open: the call goes on unfiltered)" : "\(failure)")
        }
    }

    private enum FilterResult {
        case forwarded(notes: [String])
        case answered(Outcome)
    }

    /// The route's filters over the request, offline: each on a VM of its
    /// own, with no HTTP call made (a filter that waits for one is said to).
    private static func runFilters(_ filters: [FilterConfig], on request: inout UpstreamRequest, info: any FilterCallInfo,
                                   streams: Bool) -> FilterResult {
        let services = FilterServices(logger: Logger(label: "gatewayd.filter"), shared: FilterSharedState(factory: NOOPMetricsHandler.instance))
        let vms = OfflineVMs(services: services)
        let run = FilterRun(filters: filters, taking: &request, info: info, vms: vms)
        let outcome = run.request()
        defer { run.end() }
        run.handBack(to: &request, streams: streams)
        let failures = vms.failures
        switch outcome {
        case nil:
            let waiting = vms.started.values.filter { !$0.httpCalls.isEmpty }.map(\.filter.name)
            return .forwarded(notes: failures + ["filter \(waiting.first ?? "?") waits for an HTTP call, not made offline: the request as it stands then"])
        case .proceed?:
            return .forwarded(notes: failures)
        case .answer(let local)?:
            var headers = HeaderList()
            for field in local.headers where !field.name.hasPrefix(":") { headers.add(field.name, field.value) }
            return .answered(.filterAnswered(filter: local.filter, status: local.status, headers: headers, body: local.body))
        case .closed(let filter)?:
            return .answered(.answered(.filterFailed(filter, route: info.route)))
        case .failed(let failure)?:
            return .answered(.answered(.filterFailed(failure.filter, route: info.route)))
        }
    }

    /// The route cache's key for the request, or why it bypasses the cache;
    /// with fleet scope (`storePrefix`), the store's key too.
    static func cacheNote(_ cache: RouteCacheConfig, route: String, method: HTTPMethod, target: String, headers: HeaderList, hasBody: Bool,
                          storePrefix: String? = nil) -> String {
        guard let key = CallCache.key(route: route, config: cache, method: method, target: target, headers: headers, hasBody: hasBody) else {
            return "cache: bypassed (it serves GET and HEAD with no body, no Range and no Upgrade); the request goes upstream as below"
        }
        let fields = zip(cache.key.compactMap { if case .header(let name) = $0 { name } else { nil } }, key.fields).map { "\($0)=\($1)" }
        let shared = storePrefix.map { prefix in
            let names = [false, true].map { lock in
                FleetCache.storeKey(keyPrefix: prefix, route: route, key, lock: lock).split(separator: "\n", omittingEmptySubsequences: false)
                    .joined(separator: "\\n")
            }
            return "; a local miss asks the store for \(names[0]) (its lock: \(names[1])) first"
        }
        return "cache: key \(key.route) \(key.target)" + (fields.isEmpty ? "" : " " + fields.joined(separator: " "))
            + "; a fresh stored answer is served without this request" + (shared ?? "") + ", a miss sends it"
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
