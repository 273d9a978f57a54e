import Testing
@testable import Gateway

/// A key's lease of the fleet's bucket, as a value: the orderings of calls,
/// refills and their answers, without a store.
struct FleetLeaseTests {
    @Test func aNewKeyIsAdmittedOnCreditAndTheRefillChargesIt() throws {
        var lease = FleetLease(now: 0)
        guard case .allowed(let refill?) = lease.take(now: 0, size: 4, rate: 1, nextID: 1) else { Issue.record("no refill asked"); return }
        #expect(refill == .init(id: 1, charged: 1, wanted: 4))
        // More calls before the answer: on credit, no second refill.
        #expect(lease.take(now: 0, size: 4, rate: 1, nextID: 2) == .allowed(refill: nil))
        #expect(lease.take(now: 0, size: 4, rate: 1, nextID: 3) == .allowed(refill: nil))
        #expect(lease.credit == 3)
        lease.granted(refill, got: 4, wait: 0, now: 0)
        // The refill charged one call of credit; the two after it stay owed.
        #expect(lease.credit == 2 && lease.tokens == 4)
        #expect(lease.take(now: 0, size: 4, rate: 1, nextID: 4) == .allowed(refill: nil))
        #expect(lease.take(now: 0, size: 4, rate: 1, nextID: 5) == .allowed(refill: nil))
        // Past half the lease: the next refill charges what is still owed.
        #expect(lease.take(now: 0, size: 4, rate: 1, nextID: 6) == .allowed(refill: .init(id: 6, charged: 2, wanted: 4)))
    }

    @Test func creditStopsAtOneLeaseWhileARefillIsOutAndTheNextCallWaitsForItsAnswerOnce() {
        var lease = FleetLease(now: 0)
        guard case .allowed(let refill?) = lease.take(now: 0, size: 3, rate: 2, nextID: 1) else { Issue.record("no refill asked"); return }
        for id in 2...3 { #expect(lease.take(now: 0, size: 3, rate: 2, nextID: UInt64(id)) == .allowed(refill: nil)) }
        // The store has not answered, nor failed: not a refusal of the fleet's, nor a store failure.
        #expect(lease.take(now: 0, size: 3, rate: 2, nextID: 4) == .waits(for: 1, refill: nil))
        // A call that waited and still finds nothing (others took the lease first) is refused.
        #expect(lease.take(now: 0, size: 3, rate: 2, nextID: 5, mayWait: false) == .refused(wait: 1.5))
        lease.granted(refill, got: 3, wait: 0, now: 0)
        #expect(lease.take(now: 0, size: 3, rate: 2, nextID: 6, mayWait: false) == .allowed(refill: nil))
    }

    @Test func anEmptyFleetBucketRefusesUntilItsNextTokenWithoutAskingAgain() {
        var lease = FleetLease(now: 0)
        guard case .allowed(let refill?) = lease.take(now: 0, size: 2, rate: 1, nextID: 1) else { Issue.record("no refill asked"); return }
        lease.granted(refill, got: 0, wait: 3, now: 1)
        #expect(lease.take(now: 2, size: 2, rate: 1, nextID: 2) == .refused(wait: 2))
        #expect(lease.take(now: 3.5, size: 2, rate: 1, nextID: 3) == .refused(wait: 0.5))
        // Then credit again, with a refill.
        #expect(lease.take(now: 4, size: 2, rate: 1, nextID: 4) == .allowed(refill: .init(id: 4, charged: 1, wanted: 2)))
    }

    @Test func anAnswerToAnOlderRefillIsIgnoredAndAFailedOneKeepsItsCredit() {
        var lease = FleetLease(now: 0)
        guard case .allowed(let first?) = lease.take(now: 0, size: 2, rate: 1, nextID: 1) else { Issue.record("no refill asked"); return }
        lease.failed(first)
        #expect(lease.credit == 1 && lease.inFlight == nil)
        // The store failed: no more credit on its word (`on_store_failure` decides), and it is asked again.
        guard case .unanswered(let second?) = lease.take(now: 0, size: 2, rate: 1, nextID: 2) else { Issue.record("no second refill"); return }
        #expect(second.charged == 1 && lease.credit == 1)
        lease.granted(first, got: 2, wait: 0, now: 0)
        #expect(lease.tokens == 0 && lease.credit == 1, "the first refill's late answer changed nothing")
        lease.granted(second, got: 2, wait: 0, now: 0)
        #expect(lease.tokens == 2 && lease.credit == 0)
        #expect(!lease.isIdle(now: 1, size: 2, rate: 1) && lease.isIdle(now: 2, size: 2, rate: 1))
    }

    @Test func aSpentCreditAfterAFailedRefillLeavesTheCallToTheStoreFailurePolicyAndAsksAgain() {
        var lease = FleetLease(now: 0)
        guard case .allowed(let first?) = lease.take(now: 0, size: 2, rate: 1, nextID: 1) else { Issue.record("no refill asked"); return }
        #expect(lease.take(now: 0, size: 2, rate: 1, nextID: 2) == .allowed(refill: nil))
        lease.failed(first)
        // Credit spent, the store silent: not a refusal of the fleet's.
        #expect(lease.take(now: 0, size: 2, rate: 1, nextID: 3) == .unanswered(refill: .init(id: 3, charged: 2, wanted: 2)))
        #expect(lease.take(now: 0, size: 2, rate: 1, nextID: 4) == .unanswered(refill: nil), "one refill out at a time")
        lease.granted(.init(id: 3, charged: 2, wanted: 2), got: 2, wait: 0, now: 0)
        #expect(lease.credit == 0 && lease.tokens == 2)
        #expect(lease.take(now: 0, size: 2, rate: 1, nextID: 5) == .allowed(refill: nil))
    }

    @Test func aCreditSpentWhenAnEmptyBucketAnsweredIsChargedOnceTheBucketRefills() {
        var lease = FleetLease(now: 0)
        guard case .allowed(let first?) = lease.take(now: 0, size: 2, rate: 1, nextID: 1) else { Issue.record("no refill asked"); return }
        lease.granted(first, got: 2, wait: 0, now: 0)
        #expect(lease.take(now: 0, size: 2, rate: 1, nextID: 2) == .allowed(refill: nil))
        // A refill out with nothing owed, then a whole lease on credit while it is.
        guard case .allowed(let out?) = lease.take(now: 0, size: 2, rate: 1, nextID: 3) else { Issue.record("no refill asked"); return }
        #expect(out.charged == 0)
        #expect(lease.take(now: 0, size: 2, rate: 1, nextID: 4) == .allowed(refill: nil))
        #expect(lease.take(now: 0, size: 2, rate: 1, nextID: 5) == .allowed(refill: nil))
        lease.granted(out, got: 0, wait: 1, now: 0)
        #expect(lease.credit == 2 && lease.inFlight == nil)
        #expect(lease.take(now: 0.5, size: 2, rate: 1, nextID: 6) == .refused(wait: 0.5))
        // Once the fleet's bucket has a token, the owed lease is charged, not refused for ever.
        let charge = FleetLease.Refill(id: 7, charged: 2, wanted: 2)
        #expect(lease.take(now: 1, size: 2, rate: 1, nextID: 7) == .waits(for: 7, refill: charge))
        // Charged past empty: the call that waited is refused until the debt is paid.
        lease.granted(charge, got: 0, wait: 2, now: 1)
        #expect(lease.take(now: 1, size: 2, rate: 1, nextID: 8, mayWait: false) == .refused(wait: 2))
    }
}
