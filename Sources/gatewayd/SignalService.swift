import Foundation
import Logging
import ServiceLifecycle
import UnixSignals

/// SIGHUP reloads the config. SIGTERM and SIGINT start the graceful stop
/// (the service group watches them too); a second one exits at once.
struct SignalService: Service {
    let reloader: Reloader
    let logger: Logger

    func run() async throws {
        var stops = 0
        for await signal in await UnixSignalsSequence(trapping: .sighup, .sigterm, .sigint).cancelOnGracefulShutdown() {
            if signal == .sighup {
                _ = await reloader.reload(trigger: "SIGHUP")
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
