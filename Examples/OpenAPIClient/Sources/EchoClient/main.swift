// Calls a running gatewayd (on ./gatewayd.yaml, in front of the built-in
// echo upstream) through the client swift-openapi-generator made from its
// document, and checks the typed answers: the echo's description of the
// legacy call each convenience call became, and the gateway's own typed
// problem. Exits non-zero on the first answer that is not the expected one.
import Foundation
import OpenAPIRuntime
import OpenAPIURLSession

struct Unexpected: Error, CustomStringConvertible { let description: String }

func expect(_ condition: Bool, _ what: @autoclosure () -> String) throws {
    guard condition else { throw Unexpected(description: what()) }
}

let base = CommandLine.arguments.dropFirst().first ?? "http://127.0.0.1:8080"
let client = Client(serverURL: URL(string: base)!, transport: URLSessionTransport())

// Typed path and query parameters; the route writes the legacy path and query.
let posts = try await client.listPosts(path: .init(id: 42), query: .init(draft: true, limit: 5))
guard case .default(200, let answer) = posts, case .json(let legacyCall) = answer.body else {
    throw Unexpected(description: "listPosts: \(posts)")
}
try expect(legacyCall.method == "GET" && legacyCall.path == "/api/v1/users/42/posts", "listPosts: \(legacyCall)")
try expect(legacyCall.query == "draft=true&limit=5", "listPosts query: \(legacyCall.query)")
print("listPosts(id: 42, draft: true, limit: 5) -> GET \(legacyCall.path)?\(legacyCall.query)")

// A typed JSON body, a Date among it; the route sends a GET with a query string.
let since = Date(timeIntervalSince1970: 1_714_521_600)  // 2024-05-01T00:00:00Z
let search = try await client.search(body: .json(.init(keywords: "swift nio", since: since)))
guard case .default(200, let found) = search, case .json(let searchCall) = found.body else {
    throw Unexpected(description: "search: \(search)")
}
try expect(searchCall.method == "GET" && searchCall.path == "/v1/search", "search: \(searchCall)")
try expect(searchCall.query == "q=swift%20nio&since=1714521600000&page=1", "search query: \(searchCall.query)")
print("search(keywords: \"swift nio\", since: \(since)) -> GET \(searchCall.path)?\(searchCall.query)")

// One call an hour: the first is served, the second is the gateway's typed 429.
guard case .default(200, _) = try await client.quota() else { throw Unexpected(description: "quota: the first call was not served") }
let limited = try await client.quota()
guard case .tooManyRequests(let refusal) = limited, case .applicationProblemJson(let problem) = refusal.body else {
    throw Unexpected(description: "quota: \(limited)")
}
try expect(problem.value1.status == 429 && problem.value2._type == .urn_colon_gatewayd_colon_problem_colon_rateLimited, "quota problem: \(problem)")
let retryAfter = refusal.headers.retryAfter ?? 0
try expect(retryAfter > 0 && retryAfter <= 3600, "quota Retry-After: \(retryAfter)")
print("quota() twice -> 429 \(problem.value1.title), Retry-After \(retryAfter) s")
