import CoreMetrics
import Foundation
@testable import Gateway

/// A gateway started from YAML on 127.0.0.1:0, stopped by `stop()`.
struct GatewayHarness {
    let server: GatewayServer
    let port: Int
    var base: String { "http://127.0.0.1:\(port)" }

    static func start(
        _ yaml: String, threads: Int = 1, metrics: (any MetricsFactory)? = nil, environment: [String: String] = [:]
    ) async throws -> GatewayHarness {
        let config = try ConfigLoader.load(yaml: yaml, file: "test.yaml", environment: environment).config
        OpenAPIDocuments.keep(config, yaml: yaml)
        let server = GatewayServer(config: config, metrics: metrics, threads: threads)
        Teardown.register { try? await server.shutdown() }
        let port = try await server.start()[0].port!
        return GatewayHarness(server: server, port: port)
    }

    func stop() async { try? await server.shutdown() }
}
