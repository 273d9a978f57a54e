import NIOCore
import Testing
@testable import Gateway

/// An HTTP/2 connection's idle, keep-alive and drain decisions, without a
/// session, a socket or a clock.
@Suite(.ownThreads) struct HTTP2ConnectionStateMachineTests {
    private typealias Action = HTTP2ConnectionStateMachine.Action
    private static let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    private static func at(_ seconds: Int64) -> NIODeadline { start + .seconds(seconds) }

    /// A connection whose idle_timeout is 60 s, and the actions of `events` on it, in order.
    private static func run(_ events: (inout HTTP2ConnectionStateMachine) -> [Action]) -> (HTTP2ConnectionStateMachine, [Action]) {
        var machine = HTTP2ConnectionStateMachine(now: start, idleTimeout: .seconds(60))
        let actions = events(&machine)
        return (machine, actions)
    }

    @Test func anIdleConnectionWithNoStreamGoesAwayOnceAfterIdleTimeout() {
        let (_, actions) = Self.run { machine in
            var actions = [machine.firstWake]
            // A read moves the check; a wake before it only asks again.
            machine.read(now: Self.at(30))
            actions.append(machine.timerFired(now: Self.at(60), streamsOpen: false))
            actions.append(machine.timerFired(now: Self.at(90), streamsOpen: false))
            actions.append(machine.timerFired(now: Self.at(200), streamsOpen: false))
            // Gone away: a drain after it has nothing left to say.
            actions.append(machine.quiesce(streamsOpen: false))
            return actions
        }
        #expect(actions == [.wake(at: Self.at(60)), .wake(at: Self.at(90)), .goAway, .none, .none])
    }

    @Test func aSilentPeerWithStreamsOpenIsPingedThenClosedUnlessAnyFrameComes() {
        let (machine, actions) = Self.run { machine in
            [machine.timerFired(now: Self.at(60), streamsOpen: true),
             // An early wake (a stream's deadline) waits for the PING's time.
             machine.timerFired(now: Self.at(70), streamsOpen: true),
             machine.timerFired(now: Self.at(80), streamsOpen: true),
             machine.timerFired(now: Self.at(100), streamsOpen: true)]
        }
        #expect(actions == [.ping(wakeAt: Self.at(80)), .wake(at: Self.at(80)), .close, .none])
        #expect(machine.state == .closed)
    }

    @Test func anyFrameAnswersThePing() {
        let (machine, actions) = Self.run { machine in
            let ping = machine.timerFired(now: Self.at(60), streamsOpen: true)
            machine.read(now: Self.at(61))
            return [ping, machine.timerFired(now: Self.at(80), streamsOpen: true)]
        }
        #expect(actions == [.ping(wakeAt: Self.at(80)), .wake(at: Self.at(121))])
        #expect(machine.state == .active(lastRead: Self.at(61), .serving))
    }

    @Test func aDrainWithStreamsOpenSendsTheNoticeThenTheFinalGoAwayOnce() {
        let (_, actions) = Self.run { machine in
            [machine.quiesce(streamsOpen: true),
             // A second drain signal changes nothing.
             machine.quiesce(streamsOpen: true),
             machine.graceEnded(),
             // The last stream ends after the final GOAWAY: nothing more to send, the idle check restarts.
             machine.lastStreamClosed(now: Self.at(5)),
             machine.graceEnded()]
        }
        #expect(actions == [.sendNotice(grace: .seconds(1)), .none, .goAway, .wake(at: Self.at(65)), .none])
    }

    @Test func theLastStreamEndingBeforeTheGraceSendsTheFinalGoAwayAndTheLateGraceNothing() {
        let (_, actions) = Self.run { machine in
            [machine.quiesce(streamsOpen: true), machine.lastStreamClosed(now: Self.at(0)), machine.graceEnded()]
        }
        #expect(actions == [.sendNotice(grace: .seconds(1)), .goAway, .none])
    }

    @Test func aDrainWithNoStreamOpenGoesAwayAtOnce() {
        let (_, actions) = Self.run { machine in [machine.quiesce(streamsOpen: false), machine.graceEnded()] }
        #expect(actions == [.goAway, .none])
    }

    @Test func aClosedConnectionDecidesNothing() {
        let (_, actions) = Self.run { machine in
            machine.closed()
            machine.read(now: Self.at(1))
            return [machine.firstWake, machine.timerFired(now: Self.at(100), streamsOpen: false), machine.quiesce(streamsOpen: true),
                    machine.lastStreamClosed(now: Self.at(100))]
        }
        #expect(actions == [.none, .none, .none, .none])
    }
}
