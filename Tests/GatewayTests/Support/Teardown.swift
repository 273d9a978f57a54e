import NIOConcurrencyHelpers

/// What a test started (gateways, upstreams), stopped when the test's scope
/// ends, newest first, and awaited: nothing a test started outlives it into
/// the next one's time. The scope is `OwnThreads`'; a test registers its
/// servers as it starts them (the harness and the upstreams do it themselves).
final class Teardown: Sendable {
    @TaskLocal static var current: Teardown?
    private let steps = NIOLockedValueBox<[@Sendable () async -> Void]>([])

    static func register(_ step: @escaping @Sendable () async -> Void) {
        current?.steps.withLockedValue { $0.append(step) }
    }

    /// Runs `body` in a scope of its own, then every registered step.
    static func scope(_ body: () async throws -> Void) async throws {
        let teardown = Teardown()
        do {
            try await $current.withValue(teardown) { try await body() }
        } catch {
            await teardown.run()
            throw error
        }
        await teardown.run()
    }

    private func run() async {
        let steps = steps.withLockedValue { steps in defer { steps = [] }; return steps }
        for step in steps.reversed() { await step() }
    }
}
