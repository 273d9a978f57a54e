import Foundation
@testable import Gateway

/// Every config a test starts a gateway on, kept with its OpenAPI document
/// when GATEWAYD_OPENAPI_DOCUMENTS names a folder: scripts/test then has
/// openapi-spec-validator read them all in one process
/// (scripts/openapi-validate), so the document of every test config is
/// validated, not only those of config/.
enum OpenAPIDocuments {
    static let folder = ProcessInfo.processInfo.environment["GATEWAYD_OPENAPI_DOCUMENTS"]

    static func keep(_ config: GatewayConfig, yaml: String) {
        guard let folder else { return }
        let document = OpenAPIDocument.json(config, file: "test.yaml")
        // Named by its bytes (FNV-1a), so the same document is kept once.
        let name = String(document.reduce(UInt64(0xcbf2_9ce4_8422_2325)) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 }, radix: 16)
        let base = URL(fileURLWithPath: folder).appendingPathComponent(name)
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try? Data(document).write(to: base.appendingPathExtension("json"))
        try? yaml.write(to: base.appendingPathExtension("yaml"), atomically: true, encoding: .utf8)
    }

    /// The config file a spawned gateway runs, when it loads here too.
    static func keep(file: String, environment: [String: String]) {
        guard folder != nil, let yaml = try? String(contentsOfFile: file, encoding: .utf8),
              let loaded = try? ConfigLoader.load(file: file, environment: environment) else { return }
        keep(loaded.config, yaml: yaml)
    }
}
