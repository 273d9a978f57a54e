import NIOHTTP1
import Rewriter

/// What the route's cache does for one GET or HEAD call: its key, the fill
/// it leads or waits for, and the answer it is storing as it streams to the
/// client. Decisions here are pure; `CallRunner` performs them.
final class CallCache {
    let cache: ResponseCache
    let config: RouteCacheConfig
    let key: ResponseCache.Key
    /// When the call asked (`request_time`, seconds since 1970).
    let requestedAt: Int64
    let isHead: Bool
    /// The fill this call leads: ended once, when the call ends (`finish`).
    var fill: ResponseCache.Fill?
    /// Its place among a fill's waiters.
    var waitID: UInt64?
    /// `scope: fleet`: the store that shares the route's answers; what this call stores is published there.
    var fleet: FleetCache?
    /// The fleet's lock for the key, when this call holds it (released when the fill ends).
    var fleetLock = ""
    /// The conditional fields this call added to revalidate `fill.stale` (a `304` then refreshes it).
    var revalidates = false
    /// The answer being stored, its body so far (nil: not storing).
    private(set) var storing: StoredAnswer?
    /// What `Cache-Status` and the access line say.
    var status = "fwd=miss"
    var result = CacheResult.miss

    init(cache: ResponseCache, config: RouteCacheConfig, key: ResponseCache.Key, requestedAt: Int64, isHead: Bool) {
        self.cache = cache
        self.config = config
        self.key = key
        self.requestedAt = requestedAt
        self.isHead = isHead
    }

    /// The route's key for a request to `target` with `headers` (nil: the
    /// request bypasses the cache: not GET or HEAD, a body, a `Range`, an upgrade).
    static func key(route: String, config: RouteCacheConfig, method: HTTPMethod, target: String, headers: HeaderList, hasBody: Bool)
        -> ResponseCache.Key? {
        guard method == .GET || method == .HEAD, !hasBody, !headers.contains("Range"), !headers.contains("Upgrade") else { return nil }
        let path = target.prefix { $0 != "?" }
        let keepsQuery = config.key.contains(.query)
        var fields: [String] = []
        for case .header(let name) in config.key { fields.append(headers.values(name).joined(separator: ", ")) }
        return ResponseCache.Key(route: route, target: keepsQuery ? target : String(path), fields: fields)
    }

    /// Starts storing the client's answer, when it may be stored.
    func store(code: Int, headers: HeaderList, request: HeaderList, authorized: Bool, now: Int64) {
        guard fill != nil, !isHead else { return }
        if let length = headers["Content-Length"].flatMap(Int.init), length > cache.maxEntryBytes {
            status += "; detail=too-large"
            return
        }
        switch StoredAnswer.make(status: code, headers: headers, body: [], request: request, authorized: authorized,
                                 route: config, requestedAt: requestedAt, now: now) {
        case .store(var answer):
            // Grown in place to its announced size: appended part by part, an array would double past it.
            if let length = headers["Content-Length"].flatMap(Int.init) { answer.body.reserveCapacity(length) }
            storing = answer
            status += "; stored"
        case .refuse(let why):
            status += "; detail=\(why)"
        }
    }

    /// A part of the answer being stored; past `max_entry_bytes` it is not stored.
    func bodyPart(_ bytes: some Sequence<UInt8>, count: Int) {
        guard storing != nil else { return }
        guard storing!.body.count + count <= cache.maxEntryBytes else {
            storing = nil
            return
        }
        storing!.body.append(contentsOf: bytes)
    }

    /// The call is over: a complete answer is stored; its waiters get it,
    /// or go upstream themselves. `complete`: the answer reached its end.
    func finish(complete: Bool) {
        if let waitID {
            cache.cancel(wait: waitID, key: key)
            self.waitID = nil
        }
        guard let fill = fill.take() else { return }
        guard complete, var answer = storing.take() else { return end(fill, storing: nil) }
        // Kept for minutes: a chunked answer's spare capacity would cost as much again as its bytes.
        if answer.body.capacity > answer.body.count + answer.body.count / 8 { answer.body = Array(answer.body) }
        end(fill, storing: answer)
    }

    /// A `304` refreshed the stale answer this call revalidated (or the
    /// fleet had a fresh one, `published` there already): stored, and its waiters get it.
    func refreshed(_ answer: StoredAnswer, published: Bool = false) {
        guard let fill = fill.take() else { return }
        end(fill, storing: answer, publishes: !published)
    }

    /// The leader's call failed with the gateway's `problem`: its waiters get it too.
    func failed(_ problem: Problem) {
        guard let fill = fill.take() else { return }
        end(fill, storing: nil, waiters: .failed(problem))
    }

    /// The leader served its stale answer after the upstream failed with
    /// `fwdStatus`: its waiters get that too.
    func servedStale(fwdStatus: Int) {
        guard let fill = fill.take(), let stale = fill.stale else { return }
        end(fill, storing: nil, waiters: .answer(stale, stale: true, fwdStatus: fwdStatus))
    }

    /// The fill ends here and, with fleet scope, in the store: what was stored is published, the lock released.
    private func end(_ fill: ResponseCache.Fill, storing answer: StoredAnswer?, waiters: ResponseCache.FillEnd? = nil, publishes: Bool = true) {
        cache.end(fill, storing: answer, waiters: waiters)
        guard let fleet else { return }
        fleet.publish(key, publishes ? answer : nil, lock: fleetLock, now: HTTPDate.now())
        fleetLock = ""
    }

    /// The conditional fields that revalidate `stale` (RFC 9111 section 4.3.1).
    static func conditions(for stale: StoredAnswer) -> [(String, String)] {
        if let etag = stale.etag { return [("If-None-Match", etag)] }
        return stale.lastModified.map { [("If-Modified-Since", $0)] } ?? []
    }

    /// Whether the client's own conditional request is satisfied by
    /// `answer` (RFC 9110 section 13.1.2, 13.1.3; weak comparison).
    static func notModified(_ answer: StoredAnswer, request: HeaderList) -> Bool {
        guard answer.status == 200 else { return false }
        if request.contains("If-None-Match") {
            guard let etag = answer.etag else { return false }
            let weak = { (tag: Substring) in tag.hasPrefix("W/") ? tag.dropFirst(2) : tag }
            return request.values("If-None-Match").contains { value in
                value.split(separator: ",").contains { candidate in
                    let tag = candidate.trimmingSpaces
                    return tag == "*" || weak(tag) == weak(Substring(etag))
                }
            }
        }
        guard let since = request["If-Modified-Since"].flatMap(HTTPDate.parse),
            let modified = (answer.lastModified ?? answer.headers["Date"]).flatMap(HTTPDate.parse)
        else { return false }
        return modified <= since
    }
}
