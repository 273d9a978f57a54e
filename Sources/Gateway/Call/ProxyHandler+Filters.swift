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
                                  proto: log.proto == "HTTP/1.0" || log.proto == "HTTP/1.1" ? log.proto : "HTTP/2",
                                  startNanos: FilterVM.wallClockNanos())
        let exchange = FilterExchange(request: call.request, scheme: shared.scheme, info: info)
        let requestID = call.requestID
        let filters = FilterRun(filters: route.filters, exchange: exchange, vm: host.vm) { [self] failure, failedOpen in
            host.failed(failure, failedOpen: failedOpen, route: route.config.name, requestID: requestID)
            log.reason = failedOpen ? "\(failure) (fail_open)" : failure.description
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
                endCall()
                endStreaming()
                log.reason = "filter \(local.filter) answered: \(local.details)"
                write(OwnAnswer(local, requestID: call.requestID, to: call.requestHead, close: call.streams))
            case .closed(let filter):
                endCall()
                endStreaming()
                log.reason = "filter \(filter) closed the stream"
                record(status: 0, outcome: "filter-closed")
                client.close()
            case .failed(let failure):
                failFilters(failure, call)
            }
        }
    }

    private func failFilters(_ failure: FilterFailure, _ call: Call) {
        endCall()
        endStreaming()
        log.reason = failure.description
        respond(.filterFailed(failure.filter, route: call.route.config.name), to: call.requestHead, requestID: call.requestID,
                close: call.streams)
    }

    /// The answer's head, and its whole body when it was held, through the
    /// filters, last first; a filter's own answer replaces it (returned, to
    /// be written instead). A body they changed gets its length anew.
    func filterResponse(_ head: inout ResponseHead, body: inout [UInt8]?, _ call: Call) -> OwnAnswer? {
        guard let filters = call.filters, filters.readsResponses else { return nil }
        var fields: FilterExchange.Fields = head.headers.map { ($0.name, $0.value) }
        let original = body
        switch filters.response(status: Int(head.status.code), headers: &fields, body: &body) {
        case .proceed:
            var headers = HeaderList()
            for field in fields { headers.add(field.name, field.value) }
            if let body, body != original!, headers.contains("Content-Length") { headers.set("Content-Length", String(body.count)) }
            head.headers = headers
            return nil
        case .answer(let local):
            log.reason = "filter \(local.filter) answered: \(local.details)"
            return OwnAnswer(local, requestID: call.requestID, to: call.requestHead, close: true)
        case .closed(let filter):
            log.reason = "filter \(filter) closed the stream"
            return OwnAnswer(.filterFailed(filter, route: call.route.config.name), requestID: call.requestID, traceID: log.traceHex,
                             extraHeaders: [:], to: call.requestHead, close: true)
        case .failed(let failure):
            log.reason = failure.description
            return OwnAnswer(.filterFailed(failure.filter, route: call.route.config.name), requestID: call.requestID, traceID: log.traceHex,
                             extraHeaders: [:], to: call.requestHead, close: true)
        }
    }
}

extension OwnAnswer {
    /// A filter's answer (`proxy_send_local_response`), with the request id every answer carries.
    init(_ local: FilterExchange.LocalResponse, requestID: String, to request: RequestHead, close: Bool) {
        var headers = HeaderList()
        for field in local.headers where !field.name.hasPrefix(":") { headers.add(field.name, field.value) }
        headers.set("X-Request-Id", requestID)
        self.init(status: local.status, headers: headers, body: local.body, to: request, close: close)
    }
}
