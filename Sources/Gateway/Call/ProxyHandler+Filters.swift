import NIOCore
import Rewriter

/// The route's Proxy-Wasm filters on the call: over the request that will
/// go upstream (before the embedder's modifiers), and over the answer the
/// validators accepted.
extension ProxyHandler {
    func runFilters(_ token: CallMachine.Token, _ call: Call) {
        let route = call.route
        guard let host = shared.filters?.host(for: client.eventLoop) else {
            return failFilters(FilterFailure(route.filters[0].name, "no filter host on this event loop"), call)
        }
        let info = FilterCallInfo(route: route.config.name, upstream: route.upstream.name, requestID: call.requestID,
                                  clientAddress: client.peerAddress, localAuthority: client.localAuthority, scheme: shared.scheme,
                                  proto: front.record.log.proto == "HTTP/1.0" || front.record.log.proto == "HTTP/1.1" ? front.record.log.proto : "HTTP/2",
                                  startNanos: FilterVM.wallClockNanos())
        let exchange = FilterExchange(request: call.request, scheme: shared.scheme, info: info)
        let requestID = call.requestID
        let filters = FilterRun(filters: route.filters, exchange: exchange, vm: host.vm) { [self] failure, failedOpen in
            host.failed(failure, failedOpen: failedOpen, route: route.config.name, requestID: requestID)
            front.record.log.reason = failedOpen ? "\(failure) (fail_open)" : failure.description
        }
        call.filters = filters
        filters.request { [self] outcome in
            guard machine.isCurrent(token), let call = self.call else { return }
            switch outcome {
            case .proceed:
                // What a filter wrote was checked as it wrote it (`FilterVM.isWritable`).
                exchange.apply(to: &call.request, streams: call.streams)
                runModifiers(token)
            case .answer(let local):
                front.record.log.reason = "filter \(local.filter) answered: \(local.details)"
                answer(OwnAnswer(local, requestID: call.requestID, to: call.requestHead, close: call.streams))
            case .closed(let filter):
                front.record.log.reason = "filter \(filter) closed the stream"
                cutShort("filter-closed")
            case .failed(let failure):
                failFilters(failure, call)
            }
        }
    }

    private func failFilters(_ failure: FilterFailure, _ call: Call) {
        front.record.log.reason = failure.description
        fail(.filterFailed(failure.filter, route: call.route.config.name), call, close: call.streams)
    }

    /// The answer through the route's filters (see `FilterRun.response`):
    /// the answer that replaces it, when a filter made one, logged with why.
    func filterResponse(_ head: inout ResponseHead, body: inout [UInt8]?, _ call: Call) -> OwnAnswer? {
        guard let (answer, reason) = call.filters?.response(&head, body: &body, for: call, traceID: front.record.log.traceHex) else { return nil }
        front.record.log.reason = reason
        return answer
    }
}
