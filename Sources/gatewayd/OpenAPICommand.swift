import ArgumentParser
import Foundation
import Gateway

struct OpenAPICommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "openapi", abstract: "Print the OpenAPI 3.1 document of a config's routes, as clients see them.",
        discussion: """
            Paths and methods from each route's match, the convenience parameters from \
            rewrite.params (client-side names, types, required, defaults), and every problem \
            the gateway may answer with. The same config gives the same bytes. What OpenAPI \
            cannot express (a host or header match, a prefix) is said on standard error. The \
            admin endpoint serves it at /openapi.json. See docs/openapi.md.

            Example: gatewayd openapi -c gatewayd.yaml --format yaml
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable { case json, yaml }

    @OptionGroup var options: ConfigOption

    @Option(help: "json or yaml.")
    var format: Format = .json

    func run() throws {
        let loaded = try options.load()
        for note in OpenAPIDocument.notes(loaded.config) { printError("note: \(note)") }
        switch format {
        case .json: FileHandle.standardOutput.write(Data(OpenAPIDocument.json(loaded.config, file: options.config)))
        case .yaml: print(try OpenAPIDocument.yaml(loaded.config, file: options.config), terminator: "")
        }
    }
}
