// gatewayd's config served with two Swift hooks: `EmbeddedGateway CONFIG`
// listens until it is stopped (SIGINT, SIGTERM).
import Foundation
import Gateway
import Hooks

guard CommandLine.arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: EmbeddedGateway CONFIG\n".utf8))
    exit(2)
}
let config = try ConfigLoader.load(file: CommandLine.arguments[1]).config
let server = GatewayServer(config: config, modifiers: [Sign()], validators: [RefuseStale()])
for address in try await server.start() { FileHandle.standardOutput.write(Data("listening on \(address)\n".utf8)) }
while true { try await Task.sleep(for: .seconds(3600)) }
