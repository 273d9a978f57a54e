/// What a filter starts beyond its callback: HTTP calls to the config's
/// upstreams, answered through `proxy_on_http_call_response`, and ticks.
extension FilterVM {
    /// Starts an HTTP call for the context acting now; its answer comes back
    /// to the root context, with the call's id (the SDKs route it on).
    func httpCall(_ call: FilterHTTPCall, idAt: UInt32) -> ProxyWasm.Status {
        guard let send = services.httpCall else { return .unimplemented }
        let context = effectiveContext
        // Bounded per VM and per call: a filter cannot queue its side calls ahead of everyone's traffic.
        guard httpCalls.count < Self.maxHTTPCalls,
              httpCalls.values.lazy.filter({ $0 == context }).count < Self.maxHTTPCallsPerContext
        else { return .internalFailure }
        lastHTTPCall &+= 1
        let id = lastHTTPCall
        guard memory?.write(id, at: idAt) == true else { return .invalidMemoryAccess }
        let started = send(call) { [weak self] result in self?.httpCallAnswered(id, context: context, result) }
        guard started else { return .badArgument }
        httpCalls[id] = context
        return .ok
    }

    /// Side calls in flight at once: per VM (all its calls and its root), and per context.
    static let maxHTTPCalls = 64
    static let maxHTTPCallsPerContext = 8

    private func httpCallAnswered(_ id: UInt32, context: UInt32, _ result: Result<OwnCall.Contents, any Error>) {
        guard httpCalls.removeValue(forKey: id) != nil, broken == nil else { return }
        // The call may have ended meanwhile: its context is gone, the root hears of it anyway.
        let exchange = exchanges[context]
        act(for: exchange == nil ? rootContext : context, exchange)
        switch result {
        case .success(let answer):
            lastCallStatus = UInt32(answer.status)
            var headers: FilterExchange.Fields = [(":status", String(answer.status))]
            headers += answer.headers.map { ($0.name.lowercased(), $0.value) }
            httpCallResponse = (headers, [])
            callbackBuffers[.httpCallResponseBody] = answer.body
        case .failure:
            // The SDKs read a failed call as one without headers or body.
            lastCallStatus = nil
            httpCallResponse = ([], [])
            callbackBuffers[.httpCallResponseBody] = []
        }
        defer {
            httpCallResponse = nil
            callbackBuffers[.httpCallResponseBody] = nil
        }
        let headerCount = UInt32(httpCallResponse?.headers.count ?? 0)
        let bodySize = UInt32(callbackBuffers[.httpCallResponseBody]?.count ?? 0)
        do {
            try call(.httpCallResponse, [rootContext, id, headerCount, bodySize, 0])
        } catch {
            exchange?.pending = nil
            exchange?.resumed(.failed(error))
            return
        }
        for exchange in exchanges.values { exchange.deliverPending() }
    }

    func setTick(period milliseconds: UInt32) {
        let period: Duration? = milliseconds == 0 ? nil : .milliseconds(Int64(milliseconds))
        let wasTicking = tickPeriod != nil
        tickPeriod = period
        if let period, !wasTicking { services.scheduleTick?(self, period) }
    }

    /// The tick fired: `proxy_on_tick` on the root context. Returns whether to tick again.
    func tick() -> Bool {
        guard tickPeriod != nil, broken == nil else { return false }
        act(for: rootContext, nil)
        do {
            try call(.tick, [rootContext])
        } catch {
            services.logger.error("tick failed", metadata: ["filter": .string(filter.name), "reason": .string(error.reason)])
            return false
        }
        for exchange in exchanges.values { exchange.deliverPending() }
        return tickPeriod != nil
    }
}
