import NIOCore
import Rewriter

/// What a call's request goes through before its first try: the route's
/// Proxy-Wasm filters on the call's event loop, then the embedder's
/// modifiers as a task (an async hop, taken only when there are hooks). The
/// call's request is left as they made it; the outcome comes back on the
/// call's event loop, for the runner to check that the call is still current.
enum RequestHooks {
    enum Outcome {
        case proceed
        /// A filter answered the client itself.
        case answer(OwnAnswer, reason: String)
        /// A filter closed the stream.
        case closed(reason: String)
        case failed(Problem, reason: String?)
    }

    /// `proto`: the protocol as the filters' `request.protocol` shows it;
    /// `logReason`: why a filter failed, also one let through by `fail_open`.
    static func run(_ call: Call, shared: ListenerContext, client: any ClientSide, proto: String, logReason: @escaping (String) -> Void,
                    then completion: @escaping (Outcome) -> Void) {
        guard !call.route.filters.isEmpty, call.filters == nil else { return modify(call, shared: shared, client: client, then: completion) }
        let route = call.route
        func failed(_ failure: FilterFailure) -> Outcome {
            .failed(.filterFailed(failure.filter, route: route.config.name), reason: failure.description)
        }
        guard let host = shared.filters?.host(for: client.eventLoop) else {
            return completion(failed(FilterFailure(route.filters[0].name, "no filter host on this event loop")))
        }
        let info = FilterCallInfo(route: route.config.name, upstream: route.upstream.name, requestID: call.requestID,
                                  clientAddress: client.peerAddress, localAuthority: client.localAuthority, scheme: shared.scheme, proto: proto,
                                  startNanos: FilterVM.wallClockNanos())
        let exchange = FilterExchange(taking: &call.request, info: info)
        let requestID = call.requestID
        let filters = FilterRun(filters: route.filters, exchange: exchange, vms: host) { failure, failedOpen in
            host.failed(failure, failedOpen: failedOpen, route: route.config.name, requestID: requestID)
            logReason(failedOpen ? "\(failure) (fail_open)" : failure.description)
        }
        call.filters = filters
        filters.request { outcome in
            // What a filter wrote was checked as it wrote it (`FilterVM.isWritable`).
            exchange.handBack(to: &call.request, streams: call.streams)
            switch outcome {
            case .proceed:
                modify(call, shared: shared, client: client, then: completion)
            case .answer(let local):
                completion(.answer(OwnAnswer(local, requestID: call.requestID, to: call.requestHead, close: call.streams),
                                   reason: "filter \(local.filter) answered: \(local.details)"))
            case .closed(let filter):
                completion(.closed(reason: "filter \(filter) closed the stream"))
            case .failed(let failure):
                completion(failed(failure))
            }
        }
    }

    private static func modify(_ call: Call, shared: ListenerContext, client: any ClientSide, then completion: @escaping (Outcome) -> Void) {
        guard !shared.modifiers.isEmpty else { return completion(.proceed) }
        let context = ModifierContext(route: call.route.config.name, upstream: call.route.upstream.name,
                                      client: ClientInfo(address: client.peerAddress, scheme: shared.scheme, requestID: call.requestID))
        shared.modifiers.modify(call.request, context: context, streams: call.streams, on: client.eventLoop).assumeIsolated().whenSuccess { result in
            switch result {
            case .success(let modified):
                call.request = modified
                completion(.proceed)
            case .failure(let problem):
                completion(.failed(problem, reason: nil))
            }
        }
    }
}
