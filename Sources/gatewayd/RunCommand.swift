import ArgumentParser
import Gateway

struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "run", abstract: "Run the gateway.")

    @OptionGroup var options: ConfigOption

    func run() async throws {
        let config = try options.load().config
        let server = GatewayServer(config: config)
        let addresses = try await server.start()
        for address in addresses { printError("gatewayd \(GatewayVersion.current) listening on http://\(address.ipAddress ?? "?"):\(address.port ?? 0)") }
        try await server.wait()
    }
}
