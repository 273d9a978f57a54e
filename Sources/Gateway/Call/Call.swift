import NIOCore
import Rewriter

/// The call in flight: what was asked, where it went, what its
/// asynchronous steps hold (its lifecycle is `CallStateMachine`'s). A class:
/// the runner reads and updates it many times per call, and a struct this
/// size would be copied (and its references retained) at each.
final class Call {
    let requestHead: RequestHead
    /// Whether the client keeps the connection, read from its head once.
    let keepAlive: Bool
    /// The body streams upstream as it arrives (not buffered).
    let streams: Bool
    var request: UpstreamRequest
    var route: Route
    var requestID: String
    var connection: (any UpstreamConnection)?
    /// The credential generation each of the route's refreshers gave this try.
    var credentials: [Int] = []
    /// Its place in the pool's queue while it waits for a connection.
    var waiter: UpstreamPool.WaiterID?
    /// The current try's per-try timer, and a retry's backoff: cancelled
    /// when the call ends (their tokens make a late one harmless anyway).
    var perTryTimer: Scheduled<Void>?
    var backoff: Scheduled<Void>?
    /// The endpoint of the current try (picked, then connected).
    var endpoint: Endpoint?
    /// The route's filters at work on this call (their contexts live until it ends).
    var filters: FilterRun?
    /// The fleet rate limit's verdict, still to come (the runner waits for it before the hooks).
    var limit: RateLimiter.Pending?
    /// What the route's cache does for it (nil: no cache, or a request that bypasses it).
    var cache: CallCache?
    /// The client's own request carried `Authorization` (RFC 9111 section 3.5), or a body.
    let clientAuthorized: Bool
    let clientSentBody: Bool
    /// Counted among the upstream's calls waiting for a connection.
    private var pendingOn: UpstreamState?

    func enterPending(_ state: UpstreamState) {
        leavePending()
        state.pending.add(1, ordering: .relaxed)
        pendingOn = state
    }

    func leavePending() {
        pendingOn?.pending.subtract(1, ordering: .relaxed)
        pendingOn = nil
    }

    /// The try's connection: its wait and the last try's timer are over.
    func attach(_ connection: any UpstreamConnection) {
        waiter = nil
        self.connection = connection
        endpoint = connection.endpoint
        perTryTimer?.cancel()
    }

    /// The try's connection, in an unknown state, is closed.
    func dropConnection() { connection.take()?.abandon() }

    /// The call is over: no timer, no filter context, no place in the pool's
    /// queue or among the upstream's pending calls.
    func end(pool: UpstreamPool) {
        perTryTimer?.cancel()
        backoff?.cancel()
        filters?.end()
        if let waiter, let endpoint { pool.cancel(waiter, endpoint: endpoint) }
        leavePending()
    }

    /// The route's refreshed credentials go into the try about to start.
    func takeCredentials() {
        guard !route.refreshers.isEmpty else { return }
        credentials.removeAll(keepingCapacity: true)
        for refresher in route.refreshers {
            let credential = refresher.current
            credentials.append(credential.generation)
            if let value = credential.value { request.headers.set(refresher.spec.captureHeader, value) }
        }
    }

    init(requestHead: RequestHead, request: UpstreamRequest, route: Route, requestID: String, streams: Bool, limit: RateLimiter.Pending? = nil,
         clientAuthorized: Bool = false, clientSentBody: Bool = false) {
        self.clientAuthorized = clientAuthorized
        self.clientSentBody = clientSentBody || streams
        // Read before the head moves in (after, reading it would copy the head).
        keepAlive = requestHead.keepsAlive
        self.requestHead = requestHead
        self.request = request
        self.route = route
        self.requestID = requestID
        self.streams = streams
        self.limit = limit
    }
}
