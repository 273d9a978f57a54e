import NIOHTTP1
import Rewriter
import W3CTraceContext

/// What becomes of a request head, in one step for the daemon and
/// `gatewayd explain` (so the two cannot drift): trace context (its fields
/// count towards the head's size), the checks and normalisation before
/// routing, the route, its rate limit, the upgrade asked, the body's size;
/// then, with the body read, the request the upstream receives. No I/O: a
/// rate limit's bucket is the only state it touches (a fleet limit's refill
/// is sent by the limiter, and a call that waits for one is decided later).
enum CallAdmission {
    /// The client's side of the request, as admission reads it.
    struct Client {
        var address: String
        /// The authority the client connected to (absolute-form targets naming it are the gateway's own).
        var localAuthority: String
        /// Its connection can carry a tunnel after a 101.
        var canTunnel: Bool
        var framing: RequestFraming
    }

    enum Decision {
        /// The gateway answers the request itself. `route`: the route that
        /// refused it (nil before one matched); `close`: the connection
        /// closes after the answer (the head is bad, or a body would go unread).
        case answered(Problem, extraHeaders: HeaderList, close: Bool, route: Route?)
        case admitted(Admitted)
    }

    struct Admitted {
        var match: Router.Match
        /// The body streams upstream as it arrives (a pass-through route), not read whole first.
        var streams: Bool
        /// The protocol asked of the upstream (the route allows it).
        var upgrade: String?
        /// The client waits for `100 Continue`, which the gateway answers itself (as nginx and Envoy do).
        var answersContinue: Bool
        /// The fleet's rate limit decides once its refill out has an answer (before the first try).
        var limit: RateLimiter.Pending?
    }

    /// `now`: seconds on the rate limiters' clock. Returns the trace id the
    /// call carries (logged whatever the decision), the gateway's hop in it
    /// (its spans' ids) and the decision.
    /// It takes the config's parts, not the config: a config passed from
    /// the listener's context is copied whole.
    static func admit(_ head: inout RequestHead, client: Client, tracing: TracingConfig, limits: Limits, router: Router,
                      random: inout SplitMix64, now: Double) -> (traceID: TraceID?, hop: CallTrace.Hop?, decision: Decision) {
        let (traceID, hop) = CallTrace.apply(&head.headers, config: tracing, random: &random)
        return (traceID, hop, decide(&head, client: client, limits: limits, router: router, now: now))
    }

    private static func decide(_ head: inout RequestHead, client: Client, limits: Limits, router: Router, now: Double) -> Decision {
        let hasBody = client.framing != .none && client.framing != .length(0)
        let match: Router.Match
        switch RequestRouting.route(&head, limits: limits, localAuthority: client.localAuthority, router: router) {
        case .routed(let routed, _):
            match = routed
        case .refused(let problem, let extraHeaders, let headRefused):
            // An unread body would have to be drained first; closing is simpler and safe.
            return .answered(problem, extraHeaders: extraHeaders, close: headRefused || hasBody, route: nil)
        }
        let route = match.route
        var limit: RateLimiter.Pending?
        if let limiter = route.rateLimiter {
            switch limiter.check(limiter.key(head.headers, client: client.address), now: now) {
            case .allowed: break
            case .refused(let wait):
                return .answered(.rateLimited(route: route.config.name), extraHeaders: limiter.refusalHeaders(policy: route.config.name, wait: wait),
                                 close: hasBody, route: route)
            case .waits(let pending): limit = pending
            }
        }
        // Read once: the refusal and the request built later both use it.
        let upgrade = RequestRouting.upgradeAsked(head.headers)
        if let refusal = RequestRouting.upgradeRefusal(upgrade, route: route, canTunnel: client.canTunnel) {
            return .answered(refusal, extraHeaders: [:], close: true, route: route)
        }
        // A request that switches protocols is read whole first: the tunnel follows its answer.
        let streams = hasBody && upgrade == nil && route.streamsBody(method: head.method.rawValue)
        if !streams, case .length(let size) = client.framing, size > limits.maxBodyBytes {
            // Refused at once, as nginx does: before the body is sent when the
            // client waits for 100 Continue, else without reading the rest.
            return .answered(.bodyTooLarge(limit: limits.maxBodyBytes, route: route.config.name), extraHeaders: [:], close: true, route: route)
        }
        let answersContinue = hasBody && head.headers.expectsContinue && (head.version.major > 1 || head.version.minor >= 1)
        return .admitted(Admitted(match: match, streams: streams, upgrade: upgrade, answersContinue: answersContinue, limit: limit))
    }

    /// The request the upstream receives: the route's translation, header
    /// rules and forwarding fields over the head and the body read (none yet
    /// when it streams: `streamed` is then the client's framing, kept).
    static func upstreamRequest(_ admitted: Admitted, method: String, target: String, headers: consuming HeaderList, body: [UInt8],
                                client: ClientInfo, streamed: RequestFraming? = nil) throws(Problem) -> UpstreamRequest {
        let route = admitted.match.route
        var request = try UpstreamRequest.build(method: method, target: target, headers: headers, body: body, route: route.config,
                                                upstream: route.upstream, captures: admitted.match.captures, client: client,
                                                streamed: streamed)
        if let upgrade = admitted.upgrade { request.askUpgrade(to: upgrade) }
        return request
    }
}
