import Foundation
@testable import Gateway
import NIOConcurrencyHelpers

/// The gatewayd binary run as a subprocess on a config; the ports come from
/// its "listening on" and "admin endpoint on" lines. Its standard error is
/// collected all along (so it never blocks on a full pipe) for tests to read.
final class SpawnedGateway: @unchecked Sendable {
    let process: ChildProcess
    let port: Int
    /// The admin listener's port, when the config has one (logged just
    /// after the listeners', so it is waited for).
    var adminPort: Int? {
        var port: Int?
        _ = eventuallyBlocking(timeout: 10) {
            port = Self.port(after: "admin endpoint on", in: log)
            return port != nil
        }
        return port
    }
    private let output = NIOLockedValueBox("")

    /// `command`: how to start it instead of `gatewayd run -c config` (a
    /// wrapper that execs the binary).
    init(config: String, environment: [String: String] = [:], command: [String]? = nil) throws {
        let command = command ?? [ExplainCommandTests.binary, "run", "-c", config]
        OpenAPIDocuments.keep(file: config, environment: ProcessInfo.processInfo.environment.merging(environment) { _, new in new })
        process = try ChildProcess(command[0], Array(command.dropFirst()),
                                   environment: ProcessInfo.processInfo.environment.merging(environment) { _, new in new }, output: .null, error: .pipe)
        let output = output
        process.error!.readabilityHandler = { handle in
            let data = handle.availableData
            if data.isEmpty { handle.readabilityHandler = nil } else { output.withLockedValue { $0 += String(decoding: data, as: UTF8.self) } }
        }
        var found: Int?
        let process = process
        _ = eventuallyBlocking(timeout: 30) {
            found = Self.port(after: "listening on", in: output.withLockedValue { $0 })
            return found != nil || !process.isRunning
        }
        guard let found else { throw CocoaError(.fileReadUnknown) }
        port = found
    }

    /// The config written to a file of its own, removed when the gateway stops.
    convenience init(yaml: String, environment: [String: String] = [:]) throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("gatewayd-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).yaml")
        try yaml.write(to: file, atomically: true, encoding: .utf8)
        do {
            try self.init(config: file.path, environment: environment)
        } catch {
            try? FileManager.default.removeItem(at: file)
            throw error
        }
        ownedConfig = file
    }

    private var ownedConfig: URL?

    /// Everything the process wrote to standard error so far.
    var log: String { output.withLockedValue { $0 } }

    private static func port(after marker: String, in text: String) -> Int? {
        text.split(separator: "\n").first { $0.contains(marker) }.flatMap { line in
            line.split(separator: ":").last.flatMap { Int($0.prefix { $0.isNumber }) }
        }
    }

    private func status(_ field: String) throws -> Int {
        let text = try String(contentsOfFile: "/proc/\(process.pid)/status", encoding: .utf8)
        let line = text.split(separator: "\n").first { $0.hasPrefix(field + ":") }!
        return Int(line.split(separator: " ", omittingEmptySubsequences: true)[1])! * 1024
    }

    func residentBytes() throws -> Int { try status("VmRSS") }
    func peakResidentBytes() throws -> Int { try status("VmHWM") }

    func signal(_ signal: Int32) { process.signal(signal) }

    /// The exit status, or nil if the process still runs after `timeout` seconds.
    func waitForExit(timeout: Double) -> Int32? {
        guard eventuallyBlocking(timeout: timeout, { !process.isRunning }) else { return nil }
        return process.exitCode
    }

    func stop() {
        if process.isRunning {
            process.signal(SIGTERM)
            // One that does not drain in time is killed: the wait after SIGKILL is the kernel's.
            if !eventuallyBlocking(timeout: 15, { !process.isRunning }) { process.signal(SIGKILL) }
            process.wait()
        }
        if let ownedConfig { try? FileManager.default.removeItem(at: ownedConfig) }
    }
}

/// A datagram socket standing in for systemd's `$NOTIFY_SOCKET`: a path, or
/// an abstract name when it starts with `@`.
final class NotifySocket {
    let name: String
    private let fd: Int32

    init(abstract: Bool) throws {
        name = abstract ? "@gatewayd-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            : FileManager.default.temporaryDirectory.appendingPathComponent("notify-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var path = Array(name.utf8)
        if abstract { path[0] = 0 }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path) }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + path.count + (abstract ? 0 : 1))
        let result = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        guard fd >= 0, result == 0 else { throw CocoaError(.fileWriteUnknown) }
    }

    deinit {
        close(fd)
        if !name.hasPrefix("@") { unlink(name) }
    }

    /// The next datagram, or nil after `timeout` seconds.
    func receive(timeout: Double) -> String? {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, Int32(timeout * 1000)) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(fd, &buffer, buffer.count, 0)
        return count > 0 ? String(decoding: buffer[..<count], as: UTF8.self) : nil
    }

    /// Datagrams until one contains `marker` (included), or nil after `timeout`.
    func receive(until marker: String, timeout: Double) -> [String]? {
        let deadline = Date().addingTimeInterval(timeout)
        var messages: [String] = []
        while let message = receive(timeout: max(0, deadline.timeIntervalSinceNow)) {
            messages.append(message)
            if message.contains(marker) { return messages }
        }
        return nil
    }
}
