import Foundation
@testable import Gateway

/// The OTLP trace receiver of `Peers/otlp_receiver.py` (opentelemetry-proto's
/// own decoding, grpcio's server for gRPC), from the venv `scripts/python-peers`
/// makes; the spans it received, as the JSON it prints for each.
final class OTLPReceiver: @unchecked Sendable {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
    static let python = root.appendingPathComponent(".build/peers-venv/bin/python3").path
    static let script = root.appendingPathComponent("Tests/GatewayTests/Peers/otlp_receiver.py").path

    let port: Int
    private let peer: BackgroundPeer

    /// `transport`: `http` or `grpc`.
    init(_ transport: String) throws {
        peer = try BackgroundPeer(Self.python, [Self.script, transport])
        guard peer.waitFor("\n", seconds: 20), let port = Int(peer.output.split(separator: "\n").first ?? "") else {
            peer.process.kill()
            throw CocoaError(.fileReadUnknown)
        }
        self.port = port
    }

    deinit { stop() }

    func stop() {
        peer.process.kill()
    }

    /// The spans received so far (the port line aside).
    var spans: [[String: Any]] {
        peer.readWritten()
        return peer.output.split(separator: "\n").dropFirst().compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    /// Waits (up to `seconds`) until `count` spans arrived; the spans.
    func spans(count: Int, seconds: Double = 15) async -> [[String: Any]] {
        _ = await eventually(timeout: seconds) { spans.count >= count }
        return spans
    }
}

extension Dictionary where Key == String, Value == Any {
    subscript(string key: String) -> String? { self[key] as? String }
    var attributes: [String: Any] { self["attributes"] as? [String: Any] ?? [:] }
}
