import ArgumentParser
import Gateway

@main
struct GatewayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gatewayd",
        abstract: "An HTTP gateway that translates convenience parameters for legacy services.",
        version: GatewayVersion.current,
        subcommands: [RunCommand.self, CheckCommand.self, ExplainCommand.self],
        defaultSubcommand: RunCommand.self
    )
}

struct ConfigOption: ParsableArguments {
    @Option(name: [.short, .customLong("config")], help: "The config file.")
    var config = "config/gatewayd.yaml"

    /// Loads the config or prints every problem to stderr and exits 1.
    func load() throws -> LoadedConfig {
        do {
            return try ConfigLoader.load(file: config)
        } catch {
            printError(error.description)
            printError("\(config): \(error.issues.count) problem\(error.issues.count == 1 ? "" : "s") found")
            throw ExitCode.failure
        }
    }
}
