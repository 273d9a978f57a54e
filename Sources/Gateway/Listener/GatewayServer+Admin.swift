import Rewriter

/// What the admin listener asks of a running gateway, off the actor: it
/// reads state the serving loops share, never waits for a reload.
extension GatewayServer {
    /// `DELETE /cache`: every stored answer, one route's (`route`), or one
    /// URI's (`uri`, path and query as the client sent them, on every route);
    /// returns how many keys went.
    public nonisolated func purgeCache(route: String?, uri: String?) -> Int {
        routeState.currentCache?.purge { key in
            (route == nil || key.route == route) && (uri == nil || key.target == uri || key.target == uri?.prefix { $0 != "?" }.description)
        } ?? 0
    }

    /// What `GET /store` shows: null without a store, else its address and
    /// state (`unknown` until first used, `up`, or `down` with the reason).
    public nonisolated func storeJSON() -> String {
        guard let store = routeState.currentStore else { return "null" }
        var object = JSONObject(["backend": .string("redis"), "address": .string("\(store.config.host):\(store.config.port)")])
        switch store.health {
        case .unknown: object.append("state", .string("unknown"))
        case .up: object.append("state", .string("up"))
        case .down(let reason):
            object.append("state", .string("down"))
            object.append("reason", .string(reason))
        }
        return JSONWriter.string(.object(object))
    }

    /// What `GET /upstreams` shows: each upstream's endpoints, health,
    /// ejections, calls in flight and waiting, as JSON.
    public nonisolated func upstreamsJSON() -> String {
        let echo: [JSONValue] = servesEcho.withLock { $0 }
            ? [.object(JSONObject(["name": .string(UpstreamConfig.echoName), "built_in": .bool(true), "endpoints": .array([])]))] : []
        return JSONWriter.string(.array(servedStates.withLock { $0 }.map { $0.snapshot() } + echo))
    }
}
