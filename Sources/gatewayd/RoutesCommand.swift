import ArgumentParser
import Gateway

struct RoutesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "routes",
        abstract: "Print the compiled route table: order, match, upstream, and what each route rewrites, injects, retries and validates.",
        discussion: """
            Routes are tried in this order; the first whose match holds takes the call. The admin \
            endpoint serves the same table for the running config at GET /routes.

            Example: gatewayd routes -c /etc/gatewayd/gatewayd.yaml
            """)

    @OptionGroup var options: ConfigOption

    func run() throws {
        print(RouteTable.describe(try options.load().config), terminator: "")
    }
}
