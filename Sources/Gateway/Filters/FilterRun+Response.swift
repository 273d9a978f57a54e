import NIOHTTP1
import Rewriter

extension FilterRun {
    /// The answer's head, and its whole body when it was held, through the
    /// filters, last first. Nil when they let it through (edited in place; a
    /// body they changed gets its length anew); else the answer that
    /// replaces it, and why, for the access log.
    func response(_ head: inout ResponseHead, body: inout [UInt8]?, for call: Call, traceID: String?) -> (OwnAnswer, reason: String)? {
        guard readsResponses else { return nil }
        var fields: FilterExchange.Fields = head.headers.map { ($0.name, $0.value) }
        let original = body
        switch response(status: Int(head.status.code), headers: &fields, body: &body) {
        case .proceed:
            // The framing fields stay the host's: a filter's edits to them are dropped.
            var headers = HeaderList()
            for field in fields where !FilterExchange.isFraming(field.name) { headers.add(field.name, field.value) }
            head.headers.withFields { original in
                for field in original where FilterExchange.isFraming(field.name) { headers.add(field.name, field.value) }
            }
            if let body, body != original!, headers.contains("Content-Length") { headers.set("Content-Length", String(body.count)) }
            head.headers = headers
            return nil
        case .answer(let local):
            return (OwnAnswer(local, requestID: call.requestID, to: call.requestHead, close: true), "filter \(local.filter) answered: \(local.details)")
        case .closed(let filter):
            return (OwnAnswer(.filterFailed(filter, route: call.route.config.name), requestID: call.requestID, traceID: traceID, extraHeaders: [:],
                              to: call.requestHead, close: true), "filter \(filter) closed the stream")
        case .failed(let failure):
            return (OwnAnswer(.filterFailed(failure.filter, route: call.route.config.name), requestID: call.requestID, traceID: traceID, extraHeaders: [:],
                              to: call.requestHead, close: true), failure.description)
        }
    }
}

extension OwnAnswer {
    /// A filter's answer (`proxy_send_local_response`), with the request id every answer carries.
    init(_ local: FilterExchange.LocalResponse, requestID: String, to request: RequestHead, close: Bool) {
        var headers = HeaderList()
        // Framed by the host (its Content-Length set below), whatever the filter wrote.
        for field in local.headers where !field.name.hasPrefix(":") && !FilterExchange.isFraming(field.name) { headers.add(field.name, field.value) }
        headers.set("X-Request-Id", requestID)
        self.init(status: local.status, headers: headers, body: local.body, to: request, close: close)
    }
}
