// libFuzzer entry: the route cache fed an upstream's answer fields (and a
// client's request fields) of any shape. The input's first byte picks the
// status; then lines `Name: value`, a blank line, and the request's lines.
// Nothing may trap: every directive, date, age and Vary is read, a stored
// answer is aged far into the future, refreshed by a 304 with the same
// fields, matched and checked against the request's conditions, and its
// freshness and age never go negative or overflow.
import Rewriter
@testable import Gateway

func fields(_ text: Substring) -> HeaderList {
    var list = HeaderList()
    for line in text.split(separator: "\n") {
        guard let colon = line.firstIndex(of: ":") else { continue }
        let name = String(line[..<colon]), value = String(line[line.index(after: colon)...].drop { $0 == " " })
        if HeaderList.isValidName(name), HeaderList.isValidValue(value) { list.add(name, value) }
    }
    return list
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let input = Array(UnsafeRawBufferPointer(start: start, count: count))
    guard let first = input.first else { return 0 }
    let text = String(decoding: input.dropFirst(), as: UTF8.self)
    let parts = text.split(separator: "\n\n", maxSplits: 1, omittingEmptySubsequences: false)
    let answer = fields(parts[0]), request = parts.count > 1 ? fields(parts[1]) : HeaderList()
    let status = [200, 203, 204, 206, 301, 304, 404, 410, 500, 503, 599, 100][Int(first) % 12]
    var route = RouteCacheConfig()
    route.ttl = first & 0x10 == 0 ? nil : .seconds(60)
    route.staleIfError = .seconds(Int64(first & 0x20))
    let now: Int64 = 1_800_000_000
    _ = CacheControl(answer: answer)
    _ = CacheControl(request)
    for value in answer.values("Date") + answer.values("Expires") { _ = HTTPDate.isWellFormed(value) }
    guard case .store(let stored) = StoredAnswer.make(status: status, headers: answer, body: [1, 2, 3], request: request,
                                                       authorized: first & 0x40 != 0, route: route, requestedAt: now - 1, now: now)
    else { return 0 }
    precondition(stored.lifetime >= 0 && stored.initialAge >= 0, "a negative freshness or age")
    for later in [now, now + 1, now + 86_400 * 365 * 100] {
        precondition(stored.age(now: later) >= stored.initialAge, "an age that shrank")
        _ = stored.use(now: later, requestNoCache: first & 0x80 != 0)
        _ = stored.servesOnError(now: later)
    }
    _ = stored.matches(request)
    _ = CallCache.notModified(stored, request: request)
    if let refreshed = stored.refreshed(by: answer, route: route, requestedAt: now, now: now + 10) {
        precondition(refreshed.body == stored.body, "a 304 changed the stored body")
    }
    return 0
}
