import Foundation
import Rewriter
import Testing
@testable import Gateway

/// Every route of every example config, called as its own document says and
/// as it forbids, through the daemon on both protocols; openapi-core (an
/// independent implementation) validates each request and answer against
/// the document. The calls are made from the document, not from the YAML,
/// as a client team would make them: a required parameter or body field
/// filled by its schema, then left out, then given a value of the wrong type.
/// The upstreams are one that answers every call `200` with JSON that the
/// examples' validators and health checks accept; a store is a real redis-server.
@Suite(.ownThreads) struct OpenAPIContractTests {
    /// soap-users.yaml has its own test, in front of a real SOAP service (OpenAPITests).
    static let examples = try! FileManager.default.contentsOfDirectory(atPath: OpenAPITests.root.appendingPathComponent("config/examples").path)
        .filter { $0.hasSuffix(".yaml") && $0 != "soap-users.yaml" }.sorted()

    @Test(arguments: examples, [false, true])
    func everyExampleRouteKeepsItsDocument(file: String, h2c: Bool) async throws {
        let examples = OpenAPITests.root.appendingPathComponent("config/examples").path
        var yaml = try String(contentsOfFile: "\(examples)/\(file)", encoding: .utf8)
        var redis: RedisServer?
        defer { redis?.stop() }
        if yaml.contains("redis://") {
            let server = try RedisServer()
            redis = server
            yaml = yaml.replacing(/redis:\/\/127\.0\.0\.1:\d+\/0/, with: server.url)
        }
        // Each service the example names (an instance of a pool too) is an upstream of its own.
        for url in Set(yaml.matches(of: /https?:\/\/[A-Za-z0-9.\-]+:\d+/).map { String($0.output) }) {
            yaml = yaml.replacingOccurrences(of: url, with: "http://127.0.0.1:\(try await Self.upstream())")
        }
        yaml = yaml.replacing(/address: 127\.0\.0\.1:\d+/, with: "address: 127.0.0.1:0")
            .replacingOccurrences(of: "wasm: filters/", with: "wasm: \(examples)/filters/")
            .replacingOccurrences(of: "${file:", with: "${file:\(examples)/")
        let config = try ConfigLoader.load(yaml: yaml, file: file).config
        let document = try JSONReader.parse(OpenAPIDocument.json(config, file: file))
        // Routes matched by host or header are described without that condition (`gatewayd openapi` says so): not called.
        let conditional = config.routes.filter { $0.match.host != nil || !$0.match.headers.isEmpty }.map(\.name)
        let calls = Self.calls(document).filter { call in !conditional.contains { call.operation == $0 || call.operation.hasPrefix("\($0)-") } }
        #expect(!calls.isEmpty)
        try await OpenAPITests.checkPairs(yaml: yaml, file: file, calls: calls.map(\.call), h2c: h2c)
    }

    /// An upstream answering every call `200` with JSON the examples' validators, health checks and refreshes accept; its port.
    static func upstream() async throws -> Int {
        let body = #"{"status":"ok","access_token":"t"}"#
        let upstream = RawUpstream { line in
            let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n"
            return .init(line.hasPrefix("HEAD ") ? head : head + body)
        }
        return try await upstream.start()
    }

    struct Generated {
        var operation: String
        var call: OpenAPITests.Call
    }

    /// Calls to each operation of `document`: one it allows, with every
    /// required parameter filled by its schema, and for each required
    /// parameter or body field one that leaves it out or gives it the wrong type.
    static func calls(_ document: JSONValue) -> [Generated] {
        guard case .object(let paths)? = OpenAPITests.at(document, "paths") else { return [] }
        var calls: [Generated] = []
        for member in paths {
            let path = member.key
            guard case .object(let operations) = member.value else { continue }
            for entry in operations where OpenAPIDocument.operationMethods.contains(entry.key) {
                let (method, operation) = (entry.key, entry.value)
                guard case .string(let name)? = OpenAPITests.at(operation, "operationId") else { continue }
                var target = path
                var query: [(String, String)] = []
                var required: [(name: String, schema: JSONValue?, inQuery: Bool)] = []
                if case .array(let parameters)? = OpenAPITests.at(operation, "parameters") {
                    for parameter in parameters {
                        guard case .string(let key)? = OpenAPITests.at(parameter, "name") else { continue }
                        let schema = OpenAPITests.at(parameter, "schema")
                        if OpenAPITests.at(parameter, "in") == .string("path") {
                            target = target.replacingOccurrences(of: "{\(key)}", with: Self.value(schema).text)
                        } else if OpenAPITests.at(parameter, "required") == .bool(true) {
                            query.append((key, Self.value(schema).text))
                            required.append((key, schema, true))
                        }
                    }
                }
                var contentType: String?
                var fields: [(String, JSONValue)] = []
                let content = OpenAPITests.at(operation, "requestBody", "content")
                if let schema = OpenAPITests.at(content, "application/json", "schema") {
                    contentType = "application/json"
                    if case .array(let names)? = OpenAPITests.at(schema, "required") {
                        for case .string(let key) in names {
                            fields.append((key, Self.value(OpenAPITests.at(schema, "properties", key))))
                            required.append((key, OpenAPITests.at(schema, "properties", key), false))
                        }
                    }
                } else if OpenAPITests.at(content, "*/*") != nil {
                    // A pass-through route forwards any body: send one.
                    contentType = "application/json"
                }
                let upper = method.uppercased()
                // A rate-limited route's documented 429 may answer any call.
                let limited = OpenAPITests.at(operation, "responses", "429") != nil
                let json = { (fields: [(String, JSONValue)]) in contentType.map { _ in JSONWriter.string(.object(JSONObject(fields.map { .init(key: $0.0, value: $0.1) }))) } }
                calls.append(Generated(operation: name, call: .init(method: upper, path: target, query: query, contentType: contentType,
                                                                    body: json(fields), allowed: true, limited: limited)))
                for (key, schema, inQuery) in required {
                    let wrong = Self.wrongValue(schema)
                    if inQuery {
                        let without = query.filter { $0.0 != key }
                        calls.append(Generated(operation: name, call: .init(method: upper, path: target, query: without, contentType: contentType,
                                                                            body: json(fields), allowed: false, limited: limited)))
                        if let wrong { calls.append(Generated(operation: name, call: .init(method: upper, path: target, query: without + [(key, wrong.text)],
                                                                                              contentType: contentType, body: json(fields), allowed: false, limited: limited))) }
                    } else {
                        let without = fields.filter { $0.0 != key }
                        calls.append(Generated(operation: name, call: .init(method: upper, path: target, query: query, contentType: contentType,
                                                                            body: json(without), allowed: false, limited: limited)))
                        if let wrong { calls.append(Generated(operation: name, call: .init(method: upper, path: target, query: query, contentType: contentType,
                                                                                              body: json(without + [(key, wrong)]), allowed: false, limited: limited))) }
                    }
                }
            }
        }
        return calls
    }

    /// A value `schema` accepts.
    static func value(_ schema: JSONValue?) -> JSONValue {
        if case .array(let values)? = OpenAPITests.at(schema, "enum"), let first = values.first { return first }
        let types = Self.types(schema)
        if OpenAPITests.at(schema, "format") == .string("date-time") { return .string("2024-05-01T00:00:00Z") }
        if OpenAPITests.at(schema, "format") == .string("binary") || OpenAPITests.at(schema, "contentMediaType") != nil {
            return .string("data:text/plain;name=a.txt;base64,aGk=")
        }
        if types.contains("integer") { return .number("7") }
        if types.contains("number") { return .number("1.5") }
        if types.contains("boolean") { return .bool(true) }
        return .string("x")
    }

    /// A value `schema` refuses, when it refuses any string.
    static func wrongValue(_ schema: JSONValue?) -> JSONValue? {
        let types = Self.types(schema)
        if types.contains("integer") || types.contains("number") || types.contains("boolean")
            || OpenAPITests.at(schema, "format") == .string("date-time") { return .string("not-one") }
        return nil
    }

    static func types(_ schema: JSONValue?) -> [String] {
        switch OpenAPITests.at(schema, "type") {
        case .string(let type)?: [type]
        case .array(let types)?: types.compactMap { if case .string(let type) = $0 { type } else { nil } }
        default: []
        }
    }
}

extension JSONValue {
    /// The value as a query string writes it.
    var text: String {
        switch self {
        case .string(let string): string
        case .number(let number): number
        case .bool(let bool): bool ? "true" : "false"
        default: JSONWriter.string(self)
        }
    }
}
