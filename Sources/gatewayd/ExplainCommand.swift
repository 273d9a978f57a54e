import ArgumentParser
import Foundation
import Gateway
import Rewriter

struct ExplainCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "explain",
        abstract: "Print the exact upstream request a call would become, without sending it.",
        discussion: """
            Like curl, -d sends a body with Content-Type application/x-www-form-urlencoded \
            unless a -H 'Content-Type: ...' says otherwise. Exits 1 when the gateway would \
            answer the call itself with an error (printed as the response it would send).
            """)

    @OptionGroup var options: ConfigOption

    @Option(name: .customShort("H"), help: ArgumentHelp("A request header, 'Name: value'.", valueName: "header"))
    var headers: [String] = []

    @Option(name: .customShort("d"), help: ArgumentHelp("The request body, or @file to read it.", valueName: "body"))
    var data: String?

    @Argument(help: "The request method, e.g. GET.")
    var method: String

    @Argument(help: "The request target, e.g. '/search?q=swift'.")
    var target: String

    func run() throws {
        let config = try options.load().config
        var headerList = HeaderList()
        for header in headers {
            guard let colon = header.firstIndex(of: ":") else {
                throw ValidationError("-H '\(header)' is not 'Name: value'")
            }
            let value = header[header.index(after: colon)...].drop { $0 == " " || $0 == "\t" }
            headerList.add(String(header[..<colon]), String(value))
        }
        var body: [UInt8] = []
        if let data {
            if data.hasPrefix("@") {
                let path = String(data.dropFirst())
                guard let contents = FileManager.default.contents(atPath: path) else { throw ValidationError("cannot read \(path)") }
                body = Array(contents)
            } else {
                body = Array(data.utf8)
            }
            if !headerList.contains("Content-Type") {
                headerList.add("Content-Type", "application/x-www-form-urlencoded")
                // curl's default, kept; but a JSON object sent as a form is rarely what was meant.
                if case .object? = try? JSONReader.parse(body) {
                    FileHandle.standardError.write(Data("hint: the body is a JSON object but is sent as a form, as curl would; add -H 'Content-Type: application/json' to send JSON\n".utf8))
                }
            }
        }
        if !headerList.contains("Host") { headerList.add("Host", config.listeners.first?.address.description ?? "localhost") }

        let path = String(target.prefix { $0 != "?" })
        let router = Router(config: config)
        guard let match = router.match(method: method, path: path, host: headerList["Host"], headers: headerList) else {
            return try fail(with: .noRoute(method: method, path: path))
        }
        let upstream = match.route.upstream
        let description = upstream.isEcho ? "built-in echo" : upstream.url!.description
        write("# route \(match.route.config.name) (routes[\(match.index)]) -> upstream \(upstream.name) (\(description))\n")
        do {
            let request = try UpstreamRequest.build(
                method: method, target: target, headers: headerList, body: body, route: match.route.config, upstream: upstream,
                captures: match.captures)
            write(request.wireFormat)
        } catch {
            try fail(with: error)
        }
    }

    private func fail(with problem: Problem) throws {
        write("# the gateway answers the client itself:\n")
        write(problem.wireFormat)
        throw ExitCode.failure
    }

    private func write(_ bytes: [UInt8]) {
        FileHandle.standardOutput.write(Data(bytes))
        if bytes.last != UInt8(ascii: "\n") { FileHandle.standardOutput.write(Data("\n".utf8)) }
    }

    private func write(_ text: String) { write(Array(text.utf8)) }
}
