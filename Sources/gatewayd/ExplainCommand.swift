import ArgumentParser
import Foundation
import Gateway
import Rewriter

struct ExplainCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "explain",
        abstract: "Print the exact upstream request a call would become, without sending it.",
        discussion: """
            The request goes through the daemon's own steps, as if a client at --client \
            connected to the first listener: the same checks, path normalisation, route, \
            translation and X-Forwarded-* fields. Its X-Request-Id is generated, as for every \
            call, unless -H gives one. Like curl, -d sends a body with Content-Type \
            application/x-www-form-urlencoded unless a -H 'Content-Type: ...' says otherwise. \
            Exits 1 when the gateway would answer the call itself with an error (printed as \
            the response it would send). Secrets the config interpolates show as <redacted> \
            unless --show-secrets is given.

            Example: gatewayd explain -H 'Content-Type: application/json' -d '{"keywords":"swift"}' POST /search
            """)

    @OptionGroup var options: ConfigOption

    @Option(name: .customShort("H"), help: ArgumentHelp("A request header, 'Name: value'.", valueName: "header"))
    var headers: [String] = []

    @Option(name: .customShort("d"), help: ArgumentHelp("The request body, or @file to read it.", valueName: "body"))
    var data: String?

    @Option(help: ArgumentHelp("The client's address, as X-Forwarded-For tells the upstream.", valueName: "ip"))
    var client = "127.0.0.1"

    @Flag(help: "Print the secrets the config interpolates (${env:...}, ${file:...}); by default they show as <redacted>, as /config shows them.")
    var showSecrets = false

    @Option(help: ArgumentHelp("The upstream's raw HTTP/1.1 answer (a file): also print what the client gets, as the daemon writes it.",
                               valueName: "file"))
    var answer: String?

    @Argument(help: "The request method, e.g. GET.")
    var method: String

    @Argument(help: "The request target, e.g. '/search?q=swift'.")
    var target: String

    /// What the daemon's reader would refuse before any check of its own: said here, with explain's usage.
    func validate() throws {
        guard HeaderList.isValidName(method) else { throw ValidationError("'\(method)' is not a method: one token, such as GET") }
        let lower = target.lowercased()
        guard target.hasPrefix("/") || lower.hasPrefix("http://") || lower.hasPrefix("https://") else {
            throw ValidationError("'\(target)' is not a request target: it starts with '/' ('/\(target)'), or is an absolute URL")
        }
        for header in headers where !header.contains(":") { throw ValidationError("-H '\(header)' is not 'Name: value'") }
        if let answer, FileManager.default.contents(atPath: answer) == nil {
            throw ValidationError("--answer \(answer): cannot read \(answer)")
        }
        if let data, data.hasPrefix("@") {
            let path = String(data.dropFirst())
            let file = open(path, O_RDONLY)
            guard file >= 0 else { throw ValidationError("-d @\(path): cannot read \(path): \(String(cString: strerror(errno)))") }
            close(file)
        }
    }

    func run() throws {
        let loaded = try options.load()
        let config = loaded.config
        let secrets = showSecrets ? [] : loaded.secrets.filter { !$0.isEmpty }
        var headerList = HeaderList()
        for header in headers {
            let colon = header.firstIndex(of: ":")!
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
        var random = SystemRandomNumberGenerator()
        let requestID = ClientInfo.requestID(from: headerList, random: &random)
        let scheme = config.listeners.first?.tls == nil ? "http" : "https"
        switch Explanation.explain(method: method, target: target, headers: headerList, body: body, config: config,
                                   client: ClientInfo(address: client, scheme: scheme, requestID: requestID,
                                                      trustedPeer: config.listeners.first?.trustedProxies.contains(address: client) ?? false)) {
        case .answered(let problem, let extraHeaders):
            try fail(with: problem, extraHeaders: extraHeaders)
        case .forwarded(let route, let index, let upstream, let description, let request, let notes):
            write("# route \(route) (routes[\(index)]) -> upstream \(upstream) (\(description))\n")
            if headerList["X-Request-Id"] != requestID {
                write("# X-Request-Id \(requestID) is generated here; each call gets its own\n")
            }
            for note in notes { write("# \(note)\n") }
            write(Self.hiding(secrets, in: request))
            if let answer, let raw = FileManager.default.contents(atPath: answer) {
                let method = String(decoding: request.prefix { $0 != UInt8(ascii: " ") }, as: UTF8.self)
                do throws(Explanation.UnreadableAnswer) {
                    let explained = try Explanation.answer(Array(raw), method: method, route: index, config: config, requestID: requestID,
                                                           clientMethod: self.method, requestHeaders: headerList, requestHasBody: !body.isEmpty)
                    if let verdict = explained.cache { write("# on a miss, \(verdict)\n") }
                    write("# the client gets, for the upstream's answer in \(answer):\n")
                    write(Self.hiding(secrets, in: explained.written))
                } catch {
                    throw ValidationError("--answer \(answer): \(error)")
                }
            }
        case .filterAnswered(let filter, let status, let headers, let body):
            write("# filter \(filter) answers the client itself:\n")
            var text = "HTTP/1.1 \(status)\r\n"
            for field in headers { text += "\(field.name): \(field.value)\r\n" }
            write(Self.hiding(secrets, in: Array((text + "Content-Length: \(body.count)\r\n\r\n").utf8) + body))
            throw ExitCode.failure
        }
    }

    private func fail(with problem: Problem, extraHeaders: HeaderList) throws {
        write("# the gateway answers the client itself:\n")
        write(problem.wireFormat(extraHeaders: extraHeaders))
        throw ExitCode.failure
    }

    /// What is printed with each secret shown as `<redacted>`, as `/config` shows it.
    private static func hiding(_ secrets: [String], in bytes: [UInt8]) -> [UInt8] {
        guard !secrets.isEmpty else { return bytes }
        return Array(secrets.reduce(String(decoding: bytes, as: UTF8.self)) { $0.replacing($1, with: "<redacted>") }.utf8)
    }

    private func write(_ bytes: [UInt8]) {
        FileHandle.standardOutput.write(Data(bytes))
        if bytes.last != UInt8(ascii: "\n") { FileHandle.standardOutput.write(Data("\n".utf8)) }
    }

    private func write(_ text: String) { write(Array(text.utf8)) }
}
