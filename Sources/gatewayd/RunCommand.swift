import ArgumentParser
import Gateway

struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "run", abstract: "Run the gateway.")

    @OptionGroup var options: ConfigOption

    @Option(help: "Event loops (threads) serving calls; on a few shared cores one loop may beat two. Default: one per core.")
    var eventLoops: Int?

    func run() async throws {
        let config = try options.load().config
        let server = eventLoops.map { GatewayServer(config: config, threads: max(1, $0)) } ?? GatewayServer(config: config)
        let addresses = try await server.start()
        for (listener, address) in zip(config.listeners, addresses) {
            let host = address.ipAddress.map { $0.contains(":") ? "[\($0)]" : $0 } ?? "?"
            printError("gatewayd \(GatewayVersion.current) listening on \(listener.tls == nil ? "http" : "https")://\(host):\(address.port ?? 0)")
        }
        try await server.wait()
    }
}
