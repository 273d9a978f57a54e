import Foundation
import Rewriter
import Testing
@testable import Gateway

/// `gatewayd openapi`: the document of every config in config/ and of the
/// issue's own shapes, validated by an independent OpenAPI 3.1 validator
/// (openapi-spec-validator, scripts/python-peers installs it), and what it
/// says of a route checked key by key.
@Suite(.ownThreads) struct OpenAPITests {
    static let root = ExplainCommandTests.root

    /// Validates `document` (JSON) with openapi-spec-validator; its complaint, or nil.
    static func validate(_ document: [UInt8]) throws -> String? {
        let script = """
            import json, sys
            from openapi_spec_validator import validate
            from openapi_spec_validator.validation.exceptions import OpenAPIValidationError
            try:
                validate(json.load(sys.stdin))
                print("valid")
            except OpenAPIValidationError as error:
                print(error)
            """
        let result = try runPeer(OTLPReceiver.python, ["-c", script], stdin: document)
        return result.text == "valid\n" ? nil : result.text + result.err
    }

    /// The value at `keys` in nested objects.
    static func at(_ value: JSONValue?, _ keys: String...) -> JSONValue? {
        keys.reduce(value) { value, key in if case .object(let object)? = value { object[key] } else { nil } }
    }

    static func keys(_ value: JSONValue?) -> [String] { if case .object(let object)? = value { object.map(\.key) } else { [] } }

    @Test(arguments: ConfigFilesTests.configFiles)
    func everyConfigsDocumentIsValidOpenAPI(file: String) throws {
        let loaded = try ConfigLoader.load(file: Self.root.appendingPathComponent("config/\(file)").path, environment: [:])
        let document = OpenAPIDocument.json(loaded.config, file: file)
        #expect(try Self.validate(document) == nil)
        // Deterministic: the same bytes again.
        #expect(OpenAPIDocument.json(loaded.config, file: file) == document)
        // The YAML reads back as the same document.
        let yaml = try OpenAPIDocument.yaml(loaded.config, file: file)
        #expect(yaml.hasPrefix("openapi: 3.1.0\n"), "\(yaml.prefix(200))")
    }

    @Test func aRoutesParametersTypesAndProblemsAreDescribed() throws {
        let config = try ConfigLoader.load(yaml: """
            listeners: [{address: 127.0.0.1:8080}]
            openapi: {title: Users, version: "2.0", servers: ["https://api.example.com"]}
            routes:
              - name: user
                match: {methods: [POST], path: /user}
                upstream: echo
                rewrite: {method: GET, path: "/users/{id}{?fields}", params: {since: {type: timestamp_ms}, n: {type: int, default: 1},
                          q: {from: keywords, required: true}, v: {value: "2"}}}
              - name: posts
                match: {methods: [GET], path: "/users/{uid}/posts"}
                upstream: echo
                rate_limit: {requests: 5}
                rewrite: {params: {tag: {type: string}}}
              - {name: rest, match: {prefix: /api/}, upstream: echo}
            """, file: "users.yaml").config
        let document = OpenAPIDocument.json(config, file: "users.yaml")
        #expect(try Self.validate(document) == nil)
        let root = try JSONReader.parse(document)
        #expect(Self.at(root, "info", "title") == .string("Users"))
        let paths = Self.at(root, "paths")
        #expect(Self.keys(paths) == ["/user", "/users/{uid}/posts", "/api/"])
        let post = Self.at(paths, "/user", "post")
        #expect(Self.at(post, "operationId") == .string("user"))
        let schema = Self.at(post, "requestBody", "content", "application/json", "schema")
        // Client-side names; the constant left out; the template's variables filled from parameters.
        #expect(Self.keys(Self.at(schema, "properties")) == ["since", "n", "keywords", "id", "fields"])
        #expect(Self.at(schema, "required") == .array([.string("keywords")]))
        #expect(Self.at(schema, "properties", "n", "default") == .number("1"))
        #expect(Self.keys(Self.at(post, "responses")) == ["400", "405", "408", "413", "415", "431", "502", "503", "504", "default"])
        let get = Self.at(paths, "/users/{uid}/posts", "get")
        guard case .array(let parameters)? = Self.at(get, "parameters") else { Issue.record("no parameters"); return }
        #expect(parameters.map { Self.at($0, "name") } == [.string("uid"), .string("tag")])
        #expect(Self.keys(Self.at(get, "responses", "429", "headers")) == ["RateLimit", "RateLimit-Policy", "Retry-After"])
        #expect(Self.at(paths, "/api/", "x-gatewayd-prefix") == .bool(true))
    }

    @Test func aTranslatedAnswerIsTypedAndItsErrorsListed() throws {
        let file = Self.root.appendingPathComponent("config/examples/soap-users.yaml").path
        let config = try ConfigLoader.load(file: file, environment: [:]).config
        let document = OpenAPIDocument.json(config, file: "soap-users.yaml")
        #expect(try Self.validate(document) == nil)
        let responses = Self.at(try JSONReader.parse(document), "paths", "/users/{id}", "get", "responses")
        // The SOAP fault's 404 is listed, and the 502 of an answer that cannot be translated.
        #expect(Self.keys(responses) == ["304", "400", "404", "405", "431", "502", "503", "504", "default"])
        #expect(JSONWriter.string(Self.at(responses, "502") ?? .null).contains("bad-upstream-answer"))
        // The route caches: its answers carry Cache-Status and Age, and a client's condition may get a 304.
        #expect(Self.at(responses, "default", "headers", "Cache-Status") != nil && Self.at(responses, "304", "headers", "Age") != nil)
        let schema = Self.at(responses, "default", "content", "application/json", "schema")
        #expect(JSONWriter.string(schema ?? .null) == """
            {"type":"object","properties":{"id":{"type":"integer"},"name":{},"tags":{"type":"array","items":{}},\
            "since":{"type":"integer","description":"epoch milliseconds"}},"required":["name","tags"]}
            """)
    }

    /// The command and the admin endpoint give the same document.
    @Test func theCommandAndTheAdminEndpointServeIt() throws {
        let printed = try ExplainCommandTests().run(["openapi", "-c", "config/gatewayd.yaml"])
        #expect(printed.status == 0)
        #expect(try Self.validate(Array(printed.out.utf8)) == nil)
        let yaml = try ExplainCommandTests().run(["openapi", "-c", "config/gatewayd.yaml", "--format", "yaml"])
        #expect(yaml.status == 0 && yaml.out.hasPrefix("openapi: 3.1.0\n"))
        // What OpenAPI cannot express is said beside the document.
        let headerMatched = try ExplainCommandTests().run(["openapi", "-c", "config/examples/header-injection.yaml"])
        #expect(headerMatched.status == 0 && headerMatched.err.contains("is matched by header X-Api-Version: 2, which OpenAPI cannot express"),
                "\(headerMatched.err)")
        let gateway = try SpawnedGateway(yaml: """
            listeners: [{address: 127.0.0.1:0}]
            admin: {address: 127.0.0.1:0}
            routes: [{name: echoed, upstream: echo}]
            """)
        defer { gateway.stop() }
        let admin = try #require(gateway.adminPort)
        let served = try curl(["http://127.0.0.1:\(admin)/openapi.json"])
        #expect(try Self.validate(served.out) == nil)
        #expect(served.text.contains(#""operationId":"echoed-get""#))
    }

    /// Examples/OpenAPIClient's client is generated from the document its
    /// config gives (scripts/openapi-client builds and runs it): the copy it
    /// is generated from is that document, byte for byte, and valid.
    @Test func theGeneratedClientsDocumentIsTheConfigs() throws {
        let example = Self.root.appendingPathComponent("Examples/OpenAPIClient")
        let printed = try ExplainCommandTests().run(["openapi", "-c", "Examples/OpenAPIClient/gatewayd.yaml", "--format", "yaml"])
        #expect(printed.status == 0 && printed.err.isEmpty, "\(printed.err)")
        let committed = try String(contentsOf: example.appendingPathComponent("Sources/EchoClient/openapi.yaml"), encoding: .utf8)
        #expect(printed.out == committed, "regenerate it: gatewayd openapi -c Examples/OpenAPIClient/gatewayd.yaml --format yaml")
        let json = try ExplainCommandTests().run(["openapi", "-c", "Examples/OpenAPIClient/gatewayd.yaml"])
        #expect(try Self.validate(Array(json.out.utf8)) == nil)
    }

    struct Call: Sendable, CustomTestStringConvertible {
        var method: String
        var path: String
        var query: [(String, String)] = []
        var contentType: String?
        var body: String?
        /// The document allows the request (else it forbids it, and the gateway refuses it with a documented problem).
        var allowed: Bool
        /// The status expected, when not any success (allowed) or a 400 or 415 (forbidden).
        var status: Int?
        /// The route is rate-limited: its documented 429 may answer instead.
        var limited = false
        var testDescription: String { "\(method) \(path)" }
    }

    /// Calls to the default config's routes, as clients make them.
    static let calls: [Call] = [
        Call(method: "POST", path: "/search", contentType: "application/json",
             body: #"{"keywords":"swift nio","sort":"stars","since":"2024-05-01T00:00:00Z"}"#, allowed: true),
        Call(method: "POST", path: "/search", contentType: "application/x-www-form-urlencoded", body: "keywords=swift", allowed: true),
        Call(method: "GET", path: "/search", query: [("keywords", "a b"), ("order", "asc")], allowed: true),
        Call(method: "GET", path: "/search", allowed: false),
        Call(method: "POST", path: "/search", contentType: "application/json", body: #"{"sort":"stars"}"#, allowed: false),
        Call(method: "POST", path: "/search", contentType: "application/json", body: #"{"keywords":"a","since":"yesterday"}"#, allowed: false),
        Call(method: "POST", path: "/orders", contentType: "application/json", body: #"{"item":"A-1","qty":"2","gift":true}"#, allowed: true),
        Call(method: "POST", path: "/orders", contentType: "application/json", body: #"{"item":"A-1","qty":"two"}"#, allowed: false),
        Call(method: "GET", path: "/users/42/posts", query: [("tag", "a")], allowed: true),
        // A match.prefix route (/api/) is listed as its prefix, x-gatewayd-prefix: OpenAPI has no prefix to call.
    ]

    /// Real calls through the daemon on both protocols, each request and
    /// answer validated against the document by openapi-core: what the
    /// document allows is served, what it forbids is refused with a
    /// documented problem, and every answer is one the document describes.
    @Test(arguments: [false, true])
    func realCallsMatchTheDocument(h2c: Bool) async throws {
        try await Teardown.scope {
            let yaml = try String(contentsOf: Self.root.appendingPathComponent("config/gatewayd.yaml"), encoding: .utf8)
                .replacingOccurrences(of: "127.0.0.1:8080", with: "127.0.0.1:0")
            try await Self.checkPairs(yaml: yaml, file: "gatewayd.yaml", calls: Self.calls, h2c: h2c)
        }
    }

    /// `openapi.path` serves the document on the client listener, both
    /// protocols, before any route; a reload serves the new one.
    @Test func theClientListenerServesItAtOpenAPIPathAndAReloadRenewsIt() async throws {
        let yaml = """
            listeners: [{address: 127.0.0.1:0}]
            openapi: {title: Served, path: /openapi.json}
            routes:
              - {name: first, match: {path: /first}, upstream: echo}
              - {name: everything, upstream: echo}
            """
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("openapi-served-\(getpid()).yaml")
        try yaml.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let gateway = try SpawnedGateway(config: file.path)
        defer { gateway.stop() }
        let expected = OpenAPIDocument.json(try ConfigLoader.load(file: file.path, environment: [:]).config, file: file.path)
        for options in [["--http1.1"], ["--http2-prior-knowledge"]] {
            let served = try curl(options + ["-s", "-D", "/dev/stderr", "http://127.0.0.1:\(gateway.port)/openapi.json?x=1"])
            #expect(served.out == expected, "\(options)")
            #expect(served.err.lowercased().contains("content-type: application/json"))
        }
        #expect(try Self.validate(expected) == nil)
        // Other methods go to the routes, as does every other path.
        #expect(try curl(["-s", "-X", "POST", "http://127.0.0.1:\(gateway.port)/openapi.json"]).text.contains(#""method":"POST""#))
        try yaml.replacingOccurrences(of: "/first", with: "/second").write(to: file, atomically: true, encoding: .utf8)
        gateway.signal(SIGHUP)
        let renewed = await eventually(timeout: 20) {
            (try? curl(["-s", "http://127.0.0.1:\(gateway.port)/openapi.json"]).text.contains(#""/second""#)) == true
        }
        #expect(renewed)
    }

    /// The SOAP example's typed answers and mapped faults, from spyne's real service, match its document.
    @Test(arguments: [false, true])
    func translatedAnswersMatchTheDocument(h2c: Bool) async throws {
        let service = try SOAPService()
        defer { service.stop() }
        let yaml = try String(contentsOf: Self.root.appendingPathComponent("config/examples/soap-users.yaml"), encoding: .utf8)
            .replacingOccurrences(of: "127.0.0.1:8080", with: "127.0.0.1:0").replacingOccurrences(of: "127.0.0.1:8000", with: "127.0.0.1:\(service.port)")
        try await Self.checkPairs(yaml: yaml, file: "soap-users.yaml", calls: [
            Call(method: "GET", path: "/users/7", allowed: true),
            Call(method: "GET", path: "/users/8", allowed: true, status: 404),
            Call(method: "GET", path: "/users/seven", allowed: false),
        ], h2c: h2c)
    }

    /// Takes `calls` through a gateway on `yaml`, then has openapi-core
    /// validate each request and answer against the config's document.
    static func checkPairs(yaml: String, file: String, calls: [Call], h2c: Bool) async throws {
        let config = try ConfigLoader.load(yaml: yaml, file: file).config
        let gateway = try await GatewayHarness.start(yaml)
        var pairs: [JSONValue] = []
        for call in calls {
            let query = call.query.map { "\($0.0.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)=\($0.1.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)" }
                .joined(separator: "&")
            var arguments = (h2c ? ["--http2-prior-knowledge"] : ["--http1.1"]) + ["-X", call.method, "-w", "\u{1}%{http_code}\u{1}%{content_type}"]
            if let type = call.contentType { arguments += ["-H", "Content-Type: \(type)"] }
            if let body = call.body { arguments += ["--data-binary", body] }
            arguments.append(gateway.base + call.path + (query.isEmpty ? "" : "?" + query))
            let parts = try curl(arguments).text.components(separatedBy: "\u{1}")
            try #require(parts.count == 3, "\(call.testDescription): \(parts)")
            let answered = Int(parts[1]) ?? 0
            if let status = call.status {
                #expect(answered == status, "\(call.testDescription): \(parts)")
            } else if !(call.limited && answered == 429) {
                #expect(call.allowed ? answered < 400 : [400, 415].contains(answered), "\(call.testDescription): \(parts)")
            }
            pairs.append(.object(JSONObject([
                "method": .string(call.method), "path": .string(call.path),
                "query": .object(JSONObject(call.query.map { .init(key: $0.0, value: .string($0.1)) })),
                "content_type": call.contentType.map(JSONValue.string) ?? .null, "body": call.body.map(JSONValue.string) ?? .null,
                "status": .number(parts[1]), "response_content_type": .string(parts[2].split(separator: ";").first.map(String.init) ?? ""),
                "response_body": .string(parts[0]),
            ])))
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("openapi-pairs-\(getpid())-\(file)-\(h2c)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try Data(OpenAPIDocument.json(config, file: file)).write(to: directory.appendingPathComponent("document.json"))
        try Data(JSONWriter.bytes(.array(pairs))).write(to: directory.appendingPathComponent("pairs.json"))
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Peers/openapi_pairs.py").path
        let verdicts = try runPeer(OTLPReceiver.python, [script, directory.appendingPathComponent("document.json").path,
                                                         directory.appendingPathComponent("pairs.json").path])
        let lines = verdicts.text.split(separator: "\n").map(String.init)
        try #require(lines.count == calls.count, "\(verdicts.text)\(verdicts.err)")
        for (call, line) in zip(calls, lines) {
            #expect(line.hasPrefix(call.allowed ? "request ok" : "request invalid"), "\(call.testDescription): \(line)")
            #expect(line.hasSuffix("| response ok"), "\(call.testDescription): \(line)")
        }
    }
}
