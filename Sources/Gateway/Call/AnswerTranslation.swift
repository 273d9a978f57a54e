import Rewriter

/// What a route's `response:` makes of a held answer: the one step the
/// daemon and `explain --answer` share.
enum AnswerTranslation: Equatable, Sendable {
    /// `document`: the decoded answer the validators judge; `head` and `body`: the client's answer.
    case answer(document: [UInt8], head: ResponseHead, body: [UInt8])
    /// One of the route's `errors` is in the decoded answer: the client gets `problem`.
    case error(document: [UInt8], Problem)
    /// The answer cannot be translated: a 502.
    case untranslatable(Problem)

    /// The answer inflated (gzip, deflate), decoded, checked for the
    /// route's `errors`, picked and shaped; the client's head says JSON, and
    /// its length. An answer with no body goes through as it came.
    /// `judged`: a validator reads the decoded document (else it is not written out).
    static func of(_ head: ResponseHead, _ body: [UInt8], rule: AnswerRule, route: RouteConfig, limit: Int, judged: Bool = false) -> AnswerTranslation {
        var body = body
        switch ContentCoding.decode(body, coding: head.headers["Content-Encoding"], limit: limit) {
        case .success(let decoded)?:
            body = decoded
        case .failure(let failure)?:
            var problem = Problem.badUpstreamAnswer(route: route.name)
            problem.logDetail = "response: \(failure)"
            return .untranslatable(problem)
        case nil:
            break
        }
        switch AnswerTranslator.translate(rule, contentType: head.headers["Content-Type"], body: body,
                                          maxDepth: route.rewrite?.maxJSONDepth ?? JSONReader.defaultMaxDepth, route: route.name, writesDocument: judged) {
        case nil:
            return .answer(document: body, head: head, body: body)
        case .translated(let document, let json)?:
            var client = head
            client.headers.remove("Content-Encoding")
            client.headers.remove("Vary")
            client.set("Content-Type", "application/json")
            client.set("Content-Length", String(json.count))
            return .answer(document: document, head: client, body: json)
        case .error(let document, let problem)?:
            return .error(document: document, problem)
        case .untranslatable(let problem)?:
            return .untranslatable(problem)
        }
    }
}
