import Foundation
import ArgumentParser
import Gateway

@main
struct GatewayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gatewayd",
        abstract: "An HTTP gateway that translates convenience parameters for legacy services.",
        discussion: """
            Without a command, `run`. Exit status: 0 after a clean stop, 1 when the config or a \
            listener cannot be used (every problem is printed as file:line:column: key: message), \
            64 for a command line it does not understand.

            Signals (run): SIGHUP reloads the config (a config that fails keeps the old one \
            serving); SIGUSR1 reopens the access log's file; SIGTERM and SIGINT drain (calls in \
            flight get limits.drain_timeout), a second one exits at once.

            The admin endpoint (admin.address, 127.0.0.1:9901 in the default config) serves \
            /healthz, /readyz, /metrics, /config, /routes, /upstreams, /store, /openapi.json and POST /reload.

            Examples:
              gatewayd run -c /etc/gatewayd/gatewayd.yaml
              gatewayd check -c gatewayd.yaml
              gatewayd explain -d 'keywords=swift' POST /search
              gatewayd routes
              gatewayd openapi --format yaml
            """,
        version: GatewayVersion.current,
        subcommands: [RunCommand.self, CheckCommand.self, ExplainCommand.self, RoutesCommand.self, OpenAPICommand.self],
        defaultSubcommand: RunCommand.self
    )
}

extension GatewayCommand {
    /// A first argument that names no command would otherwise be read as an
    /// argument of `run`, the default, and refused with run's usage.
    static func main() async {
        // `-v` as most daemons read it (nginx -v, haproxy -v): the version, not run's usage.
        if CommandLine.arguments.dropFirst().first == "-v" {
            print(GatewayVersion.current)
            Foundation.exit(0)
        }
        let names = configuration.subcommands.compactMap { $0.configuration.commandName } + ["help"]
        if let first = CommandLine.arguments.dropFirst().first, !first.hasPrefix("-"), !names.contains(first) {
            printError("gatewayd: unknown command '\(first)'; the commands are \(names.dropLast().joined(separator: ", ")) (see gatewayd --help)")
            Foundation.exit(64)  // EX_USAGE
        }
        await main(nil)
    }
}

struct ConfigOption: ParsableArguments {
    static let searched = ["config/gatewayd.yaml", "/etc/gatewayd/gatewayd.yaml"]

    @Option(name: [.customShort("c"), .customLong("config")],
            help: ArgumentHelp("The config file. Default: config/gatewayd.yaml in the working directory, else /etc/gatewayd/gatewayd.yaml.", valueName: "file"))
    var file: String?

    /// The file given, or the first of the default places that exists.
    var config: String {
        file ?? Self.searched.first { FileManager.default.fileExists(atPath: $0) } ?? Self.searched[0]
    }

    /// Loads the config or prints every problem to stderr and exits 1.
    func load() throws -> LoadedConfig {
        if file == nil, !Self.searched.contains(where: { FileManager.default.fileExists(atPath: $0) }) {
            printError("no config file: neither \(Self.searched[0]) (in \(FileManager.default.currentDirectoryPath)) nor \(Self.searched[1]) exists; give one with -c FILE")
            throw ExitCode.failure
        }
        do {
            return try ConfigLoader.load(file: config)
        } catch {
            printError(error.description)
            for warning in error.warnings { printError("warning: \(warning)") }
            printError("\(config): \(error.issues.count) problem\(error.issues.count == 1 ? "" : "s") found")
            throw ExitCode.failure
        }
    }
}
