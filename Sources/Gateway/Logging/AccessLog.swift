import Logging
import NIOCore

/// One structured line per call: route, method, target, status, upstream
/// status, response bytes, duration, request id.
struct AccessLog: Sendable {
    let logger: Logger
    let enabled: Bool

    struct Entry {
        var start = NIODeadline.now()
        var method = ""
        var target = ""
        var route = "-"
        var requestID = "-"
        var upstreamStatus: Int?
        var bytes = 0
        /// Why the last try failed, in full (never shown to the client).
        var reason: String?
    }

    func record(_ entry: Entry, status: Int, outcome: String) {
        guard enabled else { return }
        var metadata: Logger.Metadata = [
            "route": .string(entry.route),
            "method": .string(entry.method),
            "target": .string(entry.target),
            "status": .stringConvertible(status),
            "upstream_status": .string(entry.upstreamStatus.map(String.init) ?? "-"),
            "bytes": .stringConvertible(entry.bytes),
            "duration_ms": .string(String(format3((NIODeadline.now() - entry.start).nanoseconds))),
            "request_id": .string(entry.requestID),
            "outcome": .string(outcome),
        ]
        // Only failed tries have one: no second dictionary per call.
        if let reason = entry.reason { metadata["reason"] = .string(reason) }
        logger.info("access", metadata: metadata)
    }

    /// Milliseconds with three decimals, without Foundation formatting.
    private func format3(_ nanoseconds: Int64) -> String {
        let micros = nanoseconds / 1000
        let fraction = String(micros % 1000)
        return "\(micros / 1000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
    }
}
