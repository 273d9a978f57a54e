import NIOCore
import Rewriter

/// `cache: {scope: fleet}`, performed: a local miss asks the store before
/// the call goes upstream. The machine stays in `lookingUp` while the store
/// answers; the answer carries the call's token, so one that comes after the
/// call ended (its client left, its deadline passed) changes nothing but
/// the lock it may have taken, which is released.
extension CallRunner {
    /// How long a fleet lock is held at most, and a call waits for another process's fill.
    static let fleetLockTime = Duration.seconds(10)

    /// Asks the store for the key this call fills locally (`until`: how long it waits for another process's fill).
    func askFleet(_ fleet: FleetCache, _ token: CallMachine.Token, until: NIODeadline) {
        // A poll scheduled for a call that has ended (the connection may carry another by now) asks nothing.
        guard machine.isCurrent(token), let call, let cached = call.cache else { return }
        let lock = String(UInt64.random(in: 1...UInt64.max), radix: 16)
        let lockTime = min(call.route.config.timeout ?? Self.defaultTimeout, Self.fleetLockTime)
        let runner = NIOLoopBound(self, eventLoop: client.eventLoop)
        fleet.claim(cached.key, lock: lock, lockTime: lockTime, now: HTTPDate.now(), route: cached.config, maxEntryBytes: cached.cache.maxEntryBytes)
            .hop(to: client.eventLoop)
            .whenSuccess { [key = cached.key] turn in runner.value.fleetAnswered(turn, fleet, key: key, lock: lock, token, until: until) }
    }

    private func fleetAnswered(_ turn: FleetCache.Turn, _ fleet: FleetCache, key: ResponseCache.Key, lock: String, _ token: CallMachine.Token,
                               until: NIODeadline) {
        downstream.atEvent {
            guard machine.isCurrent(token), let call, let cached = call.cache, cached.fill != nil else {
                if case .fill = turn { fleet.publish(key, nil, lock: lock, now: 0) }
                return
            }
            let now = HTTPDate.now()
            switch turn {
            case .have(let answer) where answer.matches(call.request.headers) && answer.ttl(now: now) > 0:
                cached.status = "hit; ttl=\(answer.ttl(now: now)); detail=fleet"
                cached.result = .hit
                cached.refreshed(answer, published: true)
                serveStored(answer, now: now)
            case .fill:
                cached.fleetLock = lock
                run(machine.lookedUp(token, waits: false))
            case .wait where NIODeadline.now() < until:
                let runner = NIOLoopBound(self, eventLoop: client.eventLoop)
                client.eventLoop.scheduleTask(in: FleetCache.pollInterval) { runner.value.askFleet(fleet, token, until: until) }
            case .refused(let why):
                listener.logger.error("store: the fleet's cache entry is \(why); going upstream instead", metadata: ["route": .string(call.route.config.name)])
                run(machine.lookedUp(token, waits: false))
            case .have, .wait, .alone:
                run(machine.lookedUp(token, waits: false))
            }
        }
    }
}
