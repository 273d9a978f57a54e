import Foundation
import Gateway
import Logging
import ServiceLifecycle
import UnixSignals

/// SIGHUP reloads the config; SIGUSR1 reopens the access log's file (after
/// logrotate moved it). SIGTERM and SIGINT start the graceful stop (the
/// service group watches them too); a second one exits at once.
struct SignalService: Service {
    /// Trapped before the listeners open: systemd may send SIGHUP as soon as
    /// READY=1 arrives, and an untrapped SIGHUP or SIGUSR1 ends the process.
    let signals: UnixSignalsSequence
    let reloader: Reloader
    let server: GatewayServer
    let logger: Logger

    func run() async throws {
        var stops = 0
        for await signal in signals.cancelOnGracefulShutdown() {
            if signal == .sighup {
                _ = await reloader.reload(trigger: "SIGHUP")
                continue
            }
            if signal == .sigusr1 {
                do {
                    try server.reopenAccessLog()
                    logger.notice("access log reopened")
                } catch {
                    logger.error("access log not reopened: \(error)")
                }
                continue
            }
            stops += 1
            if stops > 1 {
                logger.warning("second \(signal): exiting without waiting for calls in flight")
                exit(1)
            }
        }
    }
}
