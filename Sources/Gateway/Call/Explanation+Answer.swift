import NIOCore
import NIOHTTP1
import Rewriter

extension Explanation {
    public struct UnreadableAnswer: Error, CustomStringConvertible {
        public let description: String
    }

    /// What the client gets when the upstream answers `raw` (its HTTP/1.1
    /// answer, as bytes) to `method` on the route at `route`, written as the
    /// daemon writes it over HTTP/1.1: the route's `response:` translation or
    /// its problem, then the head as it goes to a client (`Date` added when
    /// missing, `requestID`, the route's `response_headers`). The validators
    /// and retries are not run: this is the answer they would let through.
    public static func answer(_ raw: [UInt8], method: String, route: Int, config: GatewayConfig, requestID: String) throws(UnreadableAnswer)
        -> [UInt8] {
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
                return problem(.answerTooLarge(limit: config.limits.maxResponseBodyBytes, route: routeConfig.name), requestID: requestID, to: request)
            }
            switch AnswerTranslation.of(head, body, rule: rule, route: routeConfig, limit: config.limits.maxResponseBodyBytes) {
            case .answer(_, let translated, let json):
                head = translated
                body = json
            case .error(_, let problem), .untranslatable(let problem):
                return Self.problem(problem, requestID: requestID, to: request)
            }
        }
        head.prepareForClient(requestID: requestID, rules: routeConfig.responseHeaders, close: false)
        return written(head, body: body, method: method)
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
