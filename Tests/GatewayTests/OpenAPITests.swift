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

    /// The command and the admin endpoint give the same document.
    @Test func theCommandAndTheAdminEndpointServeIt() throws {
        let printed = try ExplainCommandTests().run(["openapi", "-c", "config/gatewayd.yaml"])
        #expect(printed.status == 0)
        #expect(try Self.validate(Array(printed.out.utf8)) == nil)
        let yaml = try ExplainCommandTests().run(["openapi", "-c", "config/gatewayd.yaml", "--format", "yaml"])
        #expect(yaml.status == 0 && yaml.out.hasPrefix("openapi: 3.1.0\n"))
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
}
