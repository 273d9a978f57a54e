import NIOCore
import Rewriter

/// What a call's request goes through before its first try: a fleet rate
/// limit's verdict when it is still to come, the route's Proxy-Wasm filters on the call's event loop, then the embedder's
/// modifiers as a task (an async hop, taken only when there are hooks). The
/// call's request is left as they made it. An outcome known at once is
/// returned; one that comes later (a filter paused, the modifiers ran) goes
/// to the runner's `hooksFinished` on the call's event loop, with the
/// token of the step that started them, for the runner to check that the
/// call is still current. Nothing is allocated for a call whose filters
/// finish at once.
enum RequestHooks {
    enum Outcome {
        case proceed
        /// The call ends here: a filter answered or closed the stream, a
        /// limit or a hook refused it (`reason`: why, for the access line).
        case end(ClientExchange.Ending, reason: String?)
    }

    typealias Token = CallRunner.CallMachine.Token

    static func run(_ call: Call, for runner: CallRunner, token: Token) -> Outcome? {
        // A fleet rate limit whose verdict is still to come is waited for first.
        if let limit = call.limit.take() {
            limit.verdict(on: runner.client.eventLoop).assumeIsolated().whenSuccess { wait in
                guard runner.isCurrent(token) else { return }
                guard let wait else {
                    if let outcome = run(call, for: runner, token: token) { runner.hooksFinished(outcome, token) }
                    return
                }
                let name = call.route.config.name
                let headers = limit.limiter.refusalHeaders(policy: name, wait: wait)
                runner.hooksFinished(.end(.problem(.rateLimited(route: name), headers: headers, close: call.streams), reason: nil), token)
            }
            return nil
        }
        guard !call.route.filters.isEmpty, call.filters == nil else { return modify(call, for: runner, token: token) }
        let route = call.route
        guard let host = runner.downstream.loopContext.filters else {
            return failed(FilterFailure(route.filters[0].name, "no filter host on this event loop"), call)
        }
        let filters = FilterRun(filters: route.filters, taking: &call.request, info: runner.downstream, vms: host)
        call.filters = filters
        guard let outcome = filters.request() else {
            filters.whenResumed = { outcome in
                if let next = filtered(outcome, call, for: runner, token: token) { runner.hooksFinished(next, token) }
            }
            return nil
        }
        return filtered(outcome, call, for: runner, token: token)
    }

    /// The filters' outcome, their request handed back to the call (what a
    /// filter wrote was checked as it wrote it: `FilterVM.isWritable`).
    private static func filtered(_ outcome: FilterRun.Outcome, _ call: Call, for runner: CallRunner, token: Token) -> Outcome? {
        call.filters?.handBack(to: &call.request, streams: call.streams)
        switch outcome {
        case .proceed:
            return modify(call, for: runner, token: token)
        case .answer(let local):
            return .end(.answer(OwnAnswer(local, requestID: call.requestID, to: call.requestHead, close: call.streams)),
                        reason: "filter \(local.filter) answered: \(local.details)")
        case .closed(let filter):
            return .end(.cut(outcome: "filter-closed"), reason: "filter \(filter) closed the stream")
        case .failed(let failure):
            return failed(failure, call)
        }
    }

    private static func failed(_ failure: FilterFailure, _ call: Call) -> Outcome {
        .end(.problem(.filterFailed(failure.filter, route: call.route.config.name), close: call.streams), reason: failure.description)
    }

    private static func modify(_ call: Call, for runner: CallRunner, token: Token) -> Outcome? {
        let listener = runner.listener
        guard !listener.modifiers.isEmpty else { return .proceed }
        let client = runner.client
        let context = ModifierContext(route: call.route.config.name, upstream: call.route.upstream.name,
                                      client: ClientInfo(address: client.peerAddress, scheme: listener.scheme, requestID: call.requestID,
                                                         trustedPeer: listener.trustedProxies.contains(address: client.peerAddress)))
        listener.modifiers.modify(call.request, context: context, streams: call.streams, on: client.eventLoop).assumeIsolated().whenSuccess { result in
            switch result {
            case .success(let modified):
                call.request = modified
                runner.hooksFinished(.proceed, token)
            case .failure(let problem):
                runner.hooksFinished(.end(.problem(problem, close: call.streams), reason: nil), token)
            }
        }
        return nil
    }
}
