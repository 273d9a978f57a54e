import ArgumentParser
import Gateway

struct CheckCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check", abstract: "Validate a config file; list every problem with its line.",
        discussion: """
            Prints `FILE: OK (...)` and exits 0, or prints every problem as \
            file:line:column: key.path: message and exits 1. Warnings (a validator that makes a \
            retry condition unreachable) are printed and do not fail the check; so are notes, on \
            standard error, of what the OpenAPI document cannot say of a route (a header or host \
            match, a prefix).

            Example: gatewayd check -c /etc/gatewayd/gatewayd.yaml (or gatewayd check FILE)
            """)

    @OptionGroup var options: ConfigOption

    @Argument(help: ArgumentHelp("The config file, as -c gives it.", valueName: "file"))
    var file: String?

    func validate() throws {
        if file != nil, options.file != nil { throw ValidationError("give the config file once: -c FILE or FILE") }
    }

    func run() throws {
        var options = options
        if let file { options.file = file }
        let loaded = try options.load()
        for warning in loaded.warnings { print("warning: \(warning)") }
        for note in OpenAPIDocument.notes(loaded.config) { printError("note: openapi: \(note)") }
        let c = loaded.config
        func count(_ n: Int, _ noun: String) -> String { "\(n) \(noun)\(n == 1 ? "" : "s")" }
        print("\(options.config): OK (\(count(c.listeners.count, "listener")), \(count(c.routes.count, "route")), \(count(c.upstreams.count, "upstream")) + echo)")
    }
}
