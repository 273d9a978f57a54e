import Foundation
import ServiceLifecycle

/// sd_notify(3) without libsystemd: datagrams to `$NOTIFY_SOCKET` (a path,
/// or `@name` for an abstract socket). Does nothing when not under systemd.
struct SystemdNotifier: Sendable {
    private let socketPath: String?

    init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        socketPath = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        let usec = environment["WATCHDOG_USEC"].flatMap(UInt64.init)
        let pidMatches = environment["WATCHDOG_PID"].map { $0 == String(getpid()) } ?? true
        watchdogInterval = usec.flatMap { pidMatches && $0 > 0 ? Duration.microseconds($0) : nil }
    }

    /// `WatchdogSec=`, when systemd asked this process for keep-alives.
    let watchdogInterval: Duration?

    func ready(status: String) { send("READY=1\nSTATUS=\(status)") }

    func reloading() {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        send("RELOADING=1\nMONOTONIC_USEC=\(Int64(now.tv_sec) * 1_000_000 + Int64(now.tv_nsec) / 1000)\nSTATUS=reloading")
    }

    func stopping() { send("STOPPING=1\nSTATUS=draining") }

    func status(_ text: String) { send("STATUS=\(text)") }

    func watchdog() { send("WATCHDOG=1") }

    private func send(_ message: String) {
        guard let socketPath else { return }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var path = Array(socketPath.utf8)
        if path.first == UInt8(ascii: "@") { path[0] = 0 }  // abstract namespace
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.count < capacity else { return }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in raw.copyBytes(from: path) }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + path.count + (path.first == 0 ? 0 : 1))
        _ = message.withCString { text in
            withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(fd, text, strlen(text), 0, $0, length) }
            }
        }
    }
}

/// Sends `WATCHDOG=1` at half systemd's watchdog interval.
struct WatchdogService: Service {
    let notifier: SystemdNotifier
    let interval: Duration

    func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            notifier.watchdog()
            try? await Task.sleep(for: interval / 2)
        }
    }
}
