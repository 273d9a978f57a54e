import NIOCore
import NIOHTTP1
import Rewriter

/// The route's cache, performed: the lookup the machine asks for, a stored
/// answer served, a fill's end taken by its waiters, the upstream's answer
/// stored as it streams to the client (or a stale one served in its place),
/// and the background refresh of `stale-while-revalidate`.
extension CallRunner {
    /// The call's cache, when its route has one and its request may use it.
    static func cache(for call: Call) -> CallCache? {
        guard let cache = call.route.cache, let config = call.route.config.cache,
            let key = CallCache.key(route: call.route.config.name, config: config, method: call.requestHead.method, target: call.requestHead.uri,
                                    headers: call.request.headers, hasBody: call.clientSentBody)
        else { return nil }
        let cached = CallCache(cache: cache, config: config, key: key, requestedAt: HTTPDate.now(), isHead: call.requestHead.method == .HEAD)
        cached.fleet = call.route.fleetCache
        return cached
    }

    func lookUp(_ token: CallMachine.Token) {
        guard let call, let cached = call.cache else { return run(machine.lookedUp(token, waits: false)) }
        let request = call.request.headers
        let control = CacheControl(request)
        let now = HTTPDate.now()
        let lookup = cached.cache.lookup(cached.key, request: request, now: now,
                                         requestNoCache: control.noCache || control.maxAge == 0 || request["Pragma"] == "no-cache",
                                         fills: !cached.isHead, coalesce: cached.config.coalesce) {
            let runner = NIOLoopBound(self, eventLoop: client.eventLoop)
            let loop = client.eventLoop
            return { end in loop.execute { runner.value.fillEnded(end, token) } }
        }
        switch lookup {
        case .fresh(let answer):
            cached.status = "hit; ttl=\(answer.ttl(now: now))"
            cached.result = .hit
            serveStored(answer, now: now)
        case .staleWhileRevalidating(let answer, let refresh):
            cached.status = "hit; ttl=\(answer.ttl(now: now))"
            cached.result = .stale
            if let refresh { refreshInBackground(refresh, call: call, cached: cached) }
            serveStored(answer, now: now)
        case .fill(let fill):
            cached.fill = fill
            if let stale = fill.stale {
                cached.status = "fwd=stale"
                let conditions = CallCache.conditions(for: stale)
                // The client's own conditions go as they are: its 304 is its own, and nothing is stored.
                if !conditions.isEmpty, !request.contains("If-None-Match"), !request.contains("If-Modified-Since") {
                    for (name, value) in conditions { call.request.headers.set(name, value) }
                    cached.revalidates = true
                }
            }
            // The fleet's store may have it; the machine stays in lookingUp while it answers.
            if let fleet = cached.fleet { return askFleet(fleet, token, until: .now() + Self.fleetLockTime.timeAmount) }
            run(machine.lookedUp(token, waits: false))
        case .wait(let id):
            cached.waitID = id
            run(machine.lookedUp(token, waits: true))
        case .pass:
            run(machine.lookedUp(token, waits: false))
        }
    }

    /// The fill this call waited for ended (on whatever loop ended it; `token`: the call's wait).
    func fillEnded(_ end: ResponseCache.FillEnd, _ token: CallMachine.Token) {
        downstream.atEvent {
            guard machine.isCurrent(token), let call, let cached = call.cache, cached.waitID != nil else { return }
            cached.waitID = nil
            switch end {
            case .answer(let answer, let stale, let fwdStatus) where answer.matches(call.request.headers):
                cached.status = stale ? "fwd=stale; fwd-status=\(fwdStatus ?? 502); collapsed" : "fwd=miss; collapsed"
                cached.result = stale ? .stale : .collapsed
                serveStored(answer, now: HTTPDate.now())
            case .failed(let problem):
                cached.status = "fwd=miss; collapsed; detail=failed"
                cached.result = .collapsed
                downstream.record.log.cache = cached.result.name
                self.end(.problem(problem))
            default:
                run(machine.fillReleased(token))
            }
        }
    }

    /// A stored answer is the client's: with its age, this call's request
    /// id and `Cache-Status`; a `304` when the client's own condition holds.
    func serveStored(_ answer: StoredAnswer, now: Int64) {
        guard let call, let cached = call.cache else { return }
        var headers = answer.headers
        headers.set("Age", String(answer.age(now: now)))
        headers.set("X-Request-Id", call.requestID)
        headers.set("Cache-Status", "gatewayd; \(cached.status)")
        // The conditions a revalidation added are the gateway's, not the client's.
        let notModified = !cached.revalidates && CallCache.notModified(answer, request: call.request.headers)
        var own = OwnAnswer(status: notModified ? 304 : answer.status, headers: headers, body: notModified ? [] : answer.body, to: call.requestHead,
                            close: !call.keepAlive || downstream.exchange.quiescing)
        // No body to measure (RFC 9110 sections 8.6, 15.4.5); HTTP/2 clients refuse a length on a 204.
        if own.status == 304 || own.status == 204 { own.head.headers.remove("Content-Length") }
        counted(cached)
        call.dropConnection()
        end(.answer(own))
    }

    /// The client's answer as it goes out: stored as it streams, or, for a
    /// fill that revalidates or may serve stale, replaced by the stored
    /// answer (true: the call ended with it).
    func cacheAnswer(_ head: inout ResponseHead, body: [UInt8], call: Call) -> Bool {
        guard let cached = call.cache else { return false }
        let status = Int(head.status.code)
        let now = HTTPDate.now()
        if let stale = cached.fill?.stale {
            if status == 304, cached.revalidates,
                let refreshed = stale.refreshed(by: head.headers, route: cached.config, requestedAt: cached.requestedAt, now: now) {
                cached.status = "fwd=stale; fwd-status=304"
                cached.result = .revalidated
                cached.refreshed(refreshed)
                serveStored(refreshed, now: now)
                return true
            }
            if status >= 500, stale.servesOnError(now: now) {
                cached.status = "fwd=stale; fwd-status=\(status)"
                cached.result = .stale
                cached.servedStale(fwdStatus: status)
                serveStored(stale, now: now)
                return true
            }
            cached.status = "fwd=stale; fwd-status=\(status)"
        }
        cached.store(code: status, headers: head.headers, request: call.request.headers, authorized: call.clientAuthorized, now: now)
        cached.bodyPart(body, count: body.count)
        head.set("Cache-Status", "gatewayd; \(cached.status)")
        counted(cached)
        return false
    }

    /// The call fails with the gateway's `problem`: a stale answer good for
    /// errors is served instead, else the fill's waiters fail too (true: served).
    func cacheFails(_ problem: Problem) -> Bool {
        guard problem.status >= 500, let call, let cached = call.cache else { return false }
        let now = HTTPDate.now()
        guard let stale = cached.fill?.stale, stale.servesOnError(now: now) else {
            cached.failed(problem)
            downstream.record.log.cache = cached.result.name
            return false
        }
        cached.status = "fwd=stale; fwd-status=\(problem.status)"
        cached.result = .stale
        cached.servedStale(fwdStatus: problem.status)
        serveStored(stale, now: now)
        return true
    }

    /// An unsafe method that went through invalidates what is stored for its path (RFC 9111 section 4.4).
    func invalidateStored(by call: Call) {
        guard call.cache == nil, let cache = call.route.cache, ![.GET, .HEAD, .OPTIONS, .TRACE].contains(call.requestHead.method),
            let status = downstream.record.log.upstreamStatus, status < 400
        else { return }
        cache.invalidate(path: String(call.requestHead.uri.prefix { $0 != "?" }))
    }

    private func counted(_ cached: CallCache) {
        downstream.record.log.cache = cached.result.name
        call?.route.metrics.cache(cached.result)
    }

    /// `stale-while-revalidate`: the route's request goes upstream once,
    /// outside any client's call (its validators and filters do not run:
    /// an answer of 500 or more is not stored), and what comes back is made
    /// the client's (`response:`, `response_headers`) and stored.
    private func refreshInBackground(_ fill: ResponseCache.Fill, call: Call, cached: CallCache) {
        var request = call.request
        if let stale = fill.stale, !request.headers.contains("If-None-Match"), !request.headers.contains("If-Modified-Since") {
            for (name, value) in CallCache.conditions(for: stale) { request.headers.set(name, value) }
        }
        let route = call.route
        let limit = min(listener.config.limits.maxResponseBodyBytes, cached.cache.maxEntryBytes)
        downstream.loopContext.pool.ownCall(request, upstream: route.upstream, timeout: route.config.timeout ?? Self.defaultTimeout, maxBodyBytes: limit)
            .assumeIsolated().whenComplete { result in
                guard case .success(let contents) = result else { return cached.cache.end(fill, storing: nil) }
                let answer = Self.refreshedAnswer(contents, fill: fill, route: route, cached: cached, limit: limit)
                cached.cache.end(fill, storing: answer)
                if let answer { cached.fleet?.publish(fill.key, answer, lock: "", now: HTTPDate.now()) }
            }
    }

    private static func refreshedAnswer(_ contents: OwnCall.Contents, fill: ResponseCache.Fill, route: Route, cached: CallCache,
                                        limit: Int) -> StoredAnswer? {
        let now = HTTPDate.now()
        if contents.status == 304, let stale = fill.stale {
            return stale.refreshed(by: contents.headers, route: cached.config, requestedAt: cached.requestedAt, now: now)
        }
        guard contents.status < 500 else { return nil }
        var head = ResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: contents.status), headers: contents.headers)
        var body = contents.body
        if let rule = route.answer {
            guard case .answer(_, let translated, let translatedBody) = AnswerTranslation.of(head, body, rule: rule, route: route.config, limit: limit)
            else { return nil }
            (head, body) = (translated, translatedBody)
        }
        head.prepareForClient(requestID: "", rules: route.config.responseHeaders, close: false)
        guard case .store(var answer) = StoredAnswer.make(status: Int(head.status.code), headers: head.headers, body: body, request: [:],
                                                           authorized: false, route: cached.config, requestedAt: cached.requestedAt, now: now)
        else { return nil }
        answer.vary = fill.stale?.vary ?? answer.vary
        return answer
    }
}
