import ArgumentParser
import Gateway

struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "run", abstract: "Run the gateway.")

    @OptionGroup var options: ConfigOption

    func run() async throws {
        _ = try options.load()
        printError("gatewayd run: the network listener is not built yet; use 'gatewayd check' and 'gatewayd explain'")
        throw ExitCode.failure
    }
}
