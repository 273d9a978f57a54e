import Foundation
import Testing
@testable import Gateway

/// systemd/gatewayd.service and gatewayd.socket as systemd reads them, with the built binary
/// installed where the unit expects it (in a scratch root).
@Suite(.ownThreads) struct SystemdUnitTests {
    static let unit = ExplainCommandTests.root.appendingPathComponent("systemd/gatewayd.service")

    @Test func systemdAnalyzeVerifyPassesWithoutWarnings() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("gatewayd-unit-\(getpid())")
        defer { try? FileManager.default.removeItem(at: root) }
        let fm = FileManager.default
        for dir in ["usr/bin", "bin", "etc/systemd/system", "usr/lib/systemd"] {
            try fm.createDirectory(at: root.appendingPathComponent(dir), withIntermediateDirectories: true)
        }
        try fm.copyItem(atPath: ExplainCommandTests.binary, toPath: root.appendingPathComponent("usr/bin/gatewayd").path)
        try fm.copyItem(atPath: "/bin/kill", toPath: root.appendingPathComponent("bin/kill").path)
        try fm.copyItem(atPath: "/usr/lib/systemd/system", toPath: root.appendingPathComponent("usr/lib/systemd/system").path)
        try fm.copyItem(at: Self.unit, to: root.appendingPathComponent("etc/systemd/system/gatewayd.service"))
        try fm.copyItem(at: Self.unit.deletingPathExtension().appendingPathExtension("socket"),
                        to: root.appendingPathComponent("etc/systemd/system/gatewayd.socket"))
        let result = try runPeer("/usr/bin/systemd-analyze", ["verify", "--root=\(root.path)", "gatewayd.service", "gatewayd.socket"])
        #expect(result.status == 0)
        #expect(result.err.isEmpty && result.out.isEmpty, "systemd-analyze: \(result.err)\(result.text)")
    }

    @Test func stopTimeoutOutlastsTheDrainAndTheWatchdogIsOn() throws {
        let text = try String(contentsOf: Self.unit, encoding: .utf8)
        func value(_ key: String) -> String? {
            text.split(separator: "\n").first { $0.hasPrefix(key + "=") }.map { String($0.dropFirst(key.count + 1)) }
        }
        #expect(value("Type") == "notify")
        #expect(value("ExecReload") == "/bin/kill -HUP $MAINPID")
        let stop = try #require(value("TimeoutStopSec").flatMap { DurationParser.parse($0) })
        #expect(stop > Limits().drainTimeout)
        #expect(value("WatchdogSec") != nil)
        #expect(value("CapabilityBoundingSet") == "")
    }
}
