import Foundation
import Gateway
import Logging
import ServiceLifecycle
import UnixSignals

/// SIGHUP reloads the config; SIGUSR1 reopens the access log's file (after
/// logrotate moved it). SIGTERM and SIGINT start the graceful stop (the
/// service group traps them before any service runs); a second one exits at once.
struct SignalService: Service {
    /// SIGHUP and SIGUSR1, trapped before the listeners open: systemd may
    /// send SIGHUP as soon as READY=1 arrives, and an untrapped one ends the process.
    let operatorSignals: UnixSignalsSequence
    let reloader: Reloader
    let server: GatewayServer
    let logger: Logger

    func run() async throws {
        let stopSignals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        await withDiscardingTaskGroup { group in
            group.addTask {
                for await signal in operatorSignals.cancelOnGracefulShutdown() {
                    if signal == .sighup { _ = await reloader.reload(trigger: "SIGHUP"); continue }
                    do {
                        try server.reopenAccessLog()
                        logger.notice("access log reopened")
                    } catch {
                        logger.error("access log not reopened: \(error)")
                    }
                }
            }
            group.addTask {
                var stops = 0
                for await signal in stopSignals.cancelOnGracefulShutdown() {
                    stops += 1
                    if stops > 1 {
                        logger.warning("second \(signal): exiting without waiting for calls in flight")
                        exit(1)
                    }
                }
            }
        }
    }
}
