import NIOCore
import NIOHTTP1
import Rewriter

extension Explanation {
    package struct UnreadableAnswer: Error, CustomStringConvertible {
        package let description: String
    }

    /// What the client gets, as the daemon writes it, and what the route's cache would do with it (nil: it has none).
    package struct AnswerExplained: Sendable {
        package let written: [UInt8]
        package let cache: String?
    }

    /// What the client gets when the upstream answers `raw` (its HTTP/1.1
    /// answer, as bytes) to `method` (the client's was `clientMethod`, when the route changed it) on the route at `route`, written as the
    /// daemon writes it over HTTP/1.1: the route's `response:` translation or
    /// its problem, then the head as it goes to a client (`Date` added when
    /// missing, `requestID`, the route's `response_headers`). The validators
    /// and retries are not run: this is the answer they would let through.
    package static func answer(_ raw: [UInt8], method: String, route: Int, config: GatewayConfig, requestID: String,
                              clientMethod: String? = nil, requestHeaders: HeaderList = [:], requestHasBody: Bool = false)
        throws(UnreadableAnswer) -> AnswerExplained {
        let routeConfig = config.routes[route]
        var decoder = HTTP1ResponseDecoder(maxHeadBytes: config.limits.maxHeaderBytes)
        decoder.expect(method: HTTPMethod(rawValue: method))
        var buffer = ByteBuffer(bytes: raw)
        var head: ResponseHead?, body: [UInt8] = [], ended = false
        do throws(HTTP1ParseError) {
            while !ended, let part = try decoder.next(&buffer) {
                switch part {
                case .head(let h): head = h
                case .body(let b): body.append(contentsOf: b.readableBytesView)
                case .end: ended = true
                }
            }
            if !ended, case .end? = try decoder.inputClosed() { ended = true }
        } catch {
            throw UnreadableAnswer(description: "not an HTTP/1.1 answer: \(error)")
        }
        guard var head, ended else { throw UnreadableAnswer(description: "the answer ends before its body does") }
        let request = RequestHead(method: HTTPMethod(rawValue: method), uri: "/", version: .http1_1, headers: [:])
        if let rule = routeConfig.response, rule.decode != .none {
            guard body.count <= config.limits.maxResponseBodyBytes else {
                return AnswerExplained(written: problem(.answerTooLarge(limit: config.limits.maxResponseBodyBytes, route: routeConfig.name), requestID: requestID, to: request), cache: nil)
            }
            switch AnswerTranslation.of(head, body, rule: rule, route: routeConfig, limit: config.limits.maxResponseBodyBytes) {
            case .answer(_, let translated, let json):
                head = translated
                body = json
            case .error(_, let problem), .untranslatable(let problem):
                return AnswerExplained(written: Self.problem(problem, requestID: requestID, to: request), cache: nil)
            }
        }
        head.prepareForClient(requestID: requestID, rules: routeConfig.responseHeaders, close: false)
        // A request that bypasses the cache gets its answer untouched by it.
        let cache = routeConfig.cache.flatMap { cache in
            CallCache.key(route: routeConfig.name, config: cache, method: HTTPMethod(rawValue: clientMethod ?? method), target: "/",
                          headers: requestHeaders, hasBody: requestHasBody).map { _ in
                cacheVerdict(&head, bodyLength: body.count, method: clientMethod ?? method, cache: cache, config: config, request: requestHeaders)
            }
        }
        return AnswerExplained(written: written(head, body: body, method: method), cache: cache)
    }

    /// What the route's cache would do with the client's answer on a miss
    /// (its `Cache-Status` set as the daemon sets it), said for the operator.
    private static func cacheVerdict(_ head: inout ResponseHead, bodyLength: Int, method: String, cache: RouteCacheConfig, config: GatewayConfig,
                                     request: HeaderList) -> String {
        guard method == "GET" else {
            if method == "HEAD" { head.set("Cache-Status", "gatewayd; fwd=miss") }
            return "the cache stores nothing for \(method): only GET answers are stored"
        }
        let now = HTTPDate.now()
        let (status, verdict): (String, String)
        if bodyLength > config.cache.maxEntryBytes {
            (status, verdict) = ("fwd=miss; detail=too-large", "the cache would not store it: larger than cache.max_entry_bytes (\(config.cache.maxEntryBytes))")
        } else {
            switch StoredAnswer.make(status: Int(head.status.code), headers: head.headers, body: [], request: request,
                                     authorized: request.contains("Authorization"), route: cache, requestedAt: now, now: now) {
            case .store(let answer):
                let stale = answer.staleIfError > 0 && !answer.mustRevalidate ? ", then served stale on errors for \(answer.staleIfError)s" : ""
                (status, verdict) = ("fwd=miss; stored", "the cache would store it, fresh for \(max(0, answer.ttl(now: now)))s\(stale)")
            case .refuse(let why):
                (status, verdict) = ("fwd=miss; detail=\(why)", "the cache would not store it: \(why)")
            }
        }
        head.set("Cache-Status", "gatewayd; \(status)")
        return verdict
    }

    /// A problem as the daemon answers it.
    private static func problem(_ problem: Problem, requestID: String, to request: RequestHead) -> [UInt8] {
        let answer = OwnAnswer(problem, requestID: requestID, traceID: nil, extraHeaders: [:], to: request, close: false)
        return written(answer.head, body: answer.body, method: request.method.rawValue)
    }

    /// The head and body framed as the HTTP/1.1 connection frames them
    /// (an answer without a length is chunked: here in one chunk, where the
    /// daemon sends one per upstream read).
    private static func written(_ head: ResponseHead, body: [UInt8], method: String) -> [UInt8] {
        var buffer = ByteBuffer()
        let (hasLength, _) = buffer.writeStatusLine(head)
        let code = head.status.code
        let bodyless = method == "HEAD" || code == 204 || code == 304 || code < 200
        let chunked = !bodyless && !hasLength
        if chunked { buffer.writeStaticString("Transfer-Encoding: chunked\r\n") }
        buffer.writeStaticString("\r\n")
        if !bodyless {
            if chunked, !body.isEmpty {
                buffer.writeString(String(body.count, radix: 16) + "\r\n")
                buffer.writeBytes(body)
                buffer.writeStaticString("\r\n")
            } else if !chunked {
                buffer.writeBytes(body)
            }
            if chunked { buffer.writeStaticString("0\r\n\r\n") }
        }
        return Array(buffer.readableBytesView)
    }
}
