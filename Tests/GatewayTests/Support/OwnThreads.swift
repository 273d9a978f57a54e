import Foundation
import Testing

/// Each test runs on threads of its own, at most `OwnThreads.width` tests
/// at once. The peers (curl, nghttp, python) are waited for synchronously;
/// on Swift's cooperative pool, one thread a core, two such waits starved
/// every other test's `await` (a deadline measured by the clock passed
/// while its task could not run), so a busy machine failed tests that pass
/// alone. Here a blocked test holds only its own thread, and the bound keeps
/// the load on the machine what the tests' deadlines were written for.
struct OwnThreads: TestTrait, SuiteTrait, TestScoping {
    static let width = 4
    var isRecursive: Bool { true }

    func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        guard !test.isSuite, testCase != nil else { return try await function() }
        await TestSlots.shared.acquire()
        do {
            try await withTaskExecutorPreference(TestThreadPool.shared) { try await Teardown.scope(function) }
        } catch {
            await TestSlots.shared.release()
            throw error
        }
        await TestSlots.shared.release()
    }
}

extension Trait where Self == OwnThreads {
    static var ownThreads: Self { OwnThreads() }
}

/// How many tests may run at once.
private actor TestSlots {
    static let shared = TestSlots(OwnThreads.width)
    private var free: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(_ count: Int) { free = count }

    func acquire() async {
        if free > 0 {
            free -= 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    func release() {
        if waiting.isEmpty { free += 1 } else { waiting.removeFirst().resume() }
    }
}

/// Plenty of threads: a test's jobs, and the blocking waits among them, never queue behind another's.
private final class TestThreadPool: TaskExecutor, @unchecked Sendable {
    static let shared = TestThreadPool(threads: 4 * OwnThreads.width)
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []

    init(threads: Int) {
        for _ in 0..<threads {
            let thread = Thread { [unowned self] in work() }
            thread.stackSize = 8 << 20
            thread.start()
        }
    }

    func enqueue(_ job: UnownedJob) {
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    private func work() {
        while true {
            condition.lock()
            while jobs.isEmpty { condition.wait() }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
