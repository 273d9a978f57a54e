import Gateway
import Logging
import Synchronization

/// Re-reads the config file and, when it checks, swaps it into the running
/// server; when it does not, the old config keeps serving and every problem
/// is logged. Reloads (SIGHUP, `POST /reload`) run one at a time.
actor Reloader {
    private let file: String
    private let server: GatewayServer
    private let notifier: SystemdNotifier
    private let logger: Logger
    private let loaded: Mutex<LoadedConfig>

    init(file: String, loaded: LoadedConfig, server: GatewayServer, notifier: SystemdNotifier, logger: Logger) {
        self.file = file
        self.server = server
        self.notifier = notifier
        self.logger = logger
        self.loaded = Mutex(loaded)
    }

    /// The running config for `/config`, secrets redacted.
    nonisolated var redactedConfig: String { loaded.withLock { "# \($0.file), as loaded; ${...} interpolations unresolved\n" + $0.redacted } }

    nonisolated var current: GatewayConfig { loaded.withLock { $0.config } }

    /// The reload before this one; each waits for it, so reloads never overlap.
    private var last: Task<ReloadOutcome, Never>?

    func reload(trigger: String) async -> ReloadOutcome {
        let previous = last
        let task = Task {
            _ = await previous?.value
            return await self.reloadNow(trigger: trigger)
        }
        last = task
        return await task.value
    }

    private func reloadNow(trigger: String) async -> ReloadOutcome {
        notifier.reloading()
        defer { notifier.ready(status: "serving") }
        let next: LoadedConfig
        do {
            next = try ConfigLoader.load(file: file)
        } catch {
            for issue in error.issues { logger.error("reload refused: \(issue)", metadata: ["trigger": .string(trigger)]) }
            server.metrics.reloaded("failed")
            return .failed(error.issues.map(\.description))
        }
        do {
            try await server.reload(next.config)
        } catch {
            logger.error("reload refused: \(error)", metadata: ["trigger": .string(trigger)])
            server.metrics.reloaded("failed")
            return .failed(["\(error)"])
        }
        loaded.withLock { $0 = next }
        StartupPages.release()
        server.metrics.reloaded("ok")
        logger.notice("config reloaded", metadata: ["trigger": .string(trigger), "file": .string(file)])
        return .reloaded
    }
}
