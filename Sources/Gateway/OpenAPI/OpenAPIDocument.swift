import Rewriter

/// A config's routes as their clients see them, as an OpenAPI 3.1 document
/// (docs/openapi.md): paths and methods from `match`, the convenience
/// parameters from `rewrite.params` (client-side names, types, required,
/// defaults; constants left out), and every problem the gateway may answer
/// with instead of the upstream. Built as a JSON value in a fixed order, so
/// the same config gives the same bytes.
package enum OpenAPIDocument {
    /// `file`: the config's path (its name is the default title).
    package static func make(_ config: GatewayConfig, file: String) -> JSONValue {
        var document = JSONObject()
        document.append("openapi", .string("3.1.0"))
        var info = JSONObject()
        let name = file.split(separator: "/").last.map(String.init) ?? file
        info.append("title", .string(config.openapi.title ?? name))
        info.append("version", .string(config.openapi.version ?? GatewayVersion.current))
        if let description = config.openapi.description { info.append("description", .string(description)) }
        document.append("info", .object(info))
        document.append("servers", .array(servers(config).map { .object(JSONObject(["url": .string($0)])) }))
        var paths = JSONObject()
        for route in config.routes {
            let (key, isPrefix) = pathKey(route.match.path)
            var item = paths[key].flatMap { if case .object(let o) = $0 { o } else { nil } } ?? JSONObject()
            if isPrefix, item["x-gatewayd-prefix"] == nil { item.append("x-gatewayd-prefix", .bool(true)) }
            let methods = route.match.methods ?? Self.anyMethod
            for method in methods {
                let verb = method.lowercased()
                // A method OpenAPI 3.1 has no operation for (PROPFIND), or one an earlier route already takes: not described.
                guard Self.operationMethods.contains(verb), item[verb] == nil else { continue }
                let id = methods.count == 1 ? route.name : "\(route.name)-\(verb)"
                item.append(verb, .object(operation(route, method: method, id: id, config: config)))
            }
            if let index = paths.index(forKey: key) { paths.setValue(.object(item), at: index) } else { paths.append(key, .object(item)) }
        }
        document.append("paths", .object(paths))
        document.append("components", .object(components))
        return .object(document)
    }

    /// What the document cannot say of the routes, for `gatewayd openapi` to
    /// print beside it: a route matched by host or header values (OpenAPI
    /// has no such condition), a prefix, a method it has no operation for,
    /// an operation an earlier route on the same path already holds.
    package static func notes(_ config: GatewayConfig) -> [String] {
        var notes: [String] = []
        var taken: Set<String> = []
        for (index, route) in config.routes.enumerated() {
            let name = "routes[\(index)] (\(route.name))"
            if let host = route.match.host { notes.append("\(name) is matched by host \(host), which OpenAPI cannot express: described for every host") }
            for field in route.match.headers {
                notes.append("\(name) is matched by header \(field.name): \(field.value), which OpenAPI cannot express: described without it")
            }
            if case .prefix(let prefix) = route.match.path {
                notes.append("\(name) matches the prefix \(prefix), which OpenAPI cannot express: listed as \(prefix) with x-gatewayd-prefix")
            }
            let key = pathKey(route.match.path).0
            for method in route.match.methods ?? anyMethod {
                if !operationMethods.contains(method.lowercased()) {
                    notes.append("\(name): \(method) has no OpenAPI 3.1 operation: not described")
                } else if !taken.insert("\(key) \(method)").inserted {
                    notes.append("\(name): \(method) \(key) is an earlier route's operation: not described again")
                }
            }
        }
        return notes
    }

    /// The document as JSON, one line.
    package static func json(_ config: GatewayConfig, file: String) -> [UInt8] {
        JSONWriter.bytes(make(config, file: file)) + [UInt8(ascii: "\n")]
    }

    static let operationMethods: Set<String> = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]
    /// A route without `methods` takes every method; these are the ones a client calls.
    static let anyMethod = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
    /// Methods whose convenience parameters arrive in the query string (`from: auto`).
    static let queryMethods: Set<String> = ["GET", "HEAD", "DELETE", "OPTIONS", "TRACE"]

    private static func servers(_ config: GatewayConfig) -> [String] {
        if !config.openapi.servers.isEmpty { return config.openapi.servers }
        return config.listeners.map { listener in
            let host = listener.address.host == "0.0.0.0" || listener.address.host == "::" ? "localhost" : listener.address.host
            let authority = SocketAddressSpec(host: host, port: listener.address.port).description
            return "\(listener.tls == nil ? "http" : "https")://\(authority)"
        }
    }

    /// The path item's key: a pattern's template as it is; a prefix (which
    /// OpenAPI cannot express) as the prefix itself, marked `x-gatewayd-prefix`.
    private static func pathKey(_ path: RouteMatch.Path) -> (String, Bool) {
        switch path {
        case .any: ("/", true)
        case .exact(let path): (path, false)
        case .prefix(let prefix): (prefix, true)
        case .pattern(let pattern): (pattern.source, false)
        }
    }

    private static func operation(_ route: RouteConfig, method: String, id: String, config: GatewayConfig) -> JSONObject {
        var operation = JSONObject()
        operation.append("operationId", .string(id))
        operation.append("summary", .string("route \(route.name) -> upstream \(route.upstream)"))
        var parameters: [JSONValue] = []
        if case .pattern(let pattern) = route.match.path {
            for name in pattern.captureNames {
                // A capture is a parameter: the rule reading it types it.
                let type = route.rewrite?.params.first { ($0.from ?? $0.name) == name && $0.value == nil }?.type
                let schema = type.map { Inputs.schema($0) } ?? JSONObject(["type": .string("string")])
                parameters.append(.object(JSONObject(["name": .string(name), "in": .string("path"), "required": .bool(true),
                                                      "schema": .object(schema)])))
            }
        }
        let inputs = Inputs(route: route, method: method)
        if inputs.inQuery {
            for property in inputs.properties {
                var parameter = JSONObject(["name": .string(property.name), "in": .string("query")])
                if property.required { parameter.append("required", .bool(true)) }
                parameter.append("schema", .object(property.schema))
                parameters.append(.object(parameter))
            }
        }
        if !parameters.isEmpty { operation.append("parameters", .array(parameters)) }
        if let body = inputs.requestBody { operation.append("requestBody", .object(body)) }
        operation.append("responses", .object(responses(route, method: method, inputs: inputs, config: config)))
        return operation
    }

    /// The answers: the upstream's (`default`, or `101` for an upgrade), then
    /// each status the gateway may answer itself, with the problem types it uses.
    private static func responses(_ route: RouteConfig, method: String, inputs: Inputs, config: GatewayConfig) -> JSONObject {
        var responses = JSONObject()
        if !route.upgrade.isEmpty {
            responses.append("101", .object(JSONObject(["description": .string("Switched to \(route.upgrade.joined(separator: ", ")): the connection is a tunnel")])))
        }
        var problems: [(status: Int, codes: [String], headers: JSONObject)] = []
        func add(_ status: Int, _ codes: [String], headers: JSONObject = JSONObject()) { problems.append((status, codes, headers)) }
        var bad = ["bad-target", "malformed-request"]
        if route.rewrite != nil { bad += ["invalid-json", "not-an-object", "invalid-query", "missing-parameter", "invalid-parameter"] }
        if !route.upgrade.isEmpty { bad.append("upgrade-not-allowed") }
        add(400, bad)
        if route.match.methods != nil {
            add(405, ["method-not-allowed"], headers: JSONObject(["Allow": header("The methods the path takes", schema: ["type": .string("string")])]))
        }
        if inputs.takesBody {
            add(408, ["body-timeout"])
            add(413, ["body-too-large"])
            if route.rewrite != nil { add(415, ["unsupported-body"]) }
        }
        add(431, ["headers-too-large"])
        if route.rateLimit != nil {
            let integer: [String: JSONValue] = ["type": .string("integer")]
            add(429, ["rate-limited"], headers: JSONObject([
                "RateLimit": header("IETF RateLimit fields: remaining calls and seconds to the reset", schema: ["type": .string("string")]),
                "RateLimit-Policy": header("The route's policy: calls per window", schema: ["type": .string("string")]),
                "Retry-After": header("Seconds until a call may succeed", schema: integer),
            ]))
        }
        if !config.filters(of: route).isEmpty { add(500, ["filter-failed"]) }
        var upstream = ["upstream-connect-failure", "upstream-reset", "upstream-refused-stream"]
        if !route.validate.isEmpty { upstream.append("validator-failed") }
        if route.validate.contains(where: { [$0.then, $0.otherwise].contains { if case .refresh = $0 { true } else { false } } }) {
            upstream.append("refresh-failed")
        }
        let translates = route.response.map { $0.decode != .none } ?? false
        if translates { upstream.append("bad-upstream-answer") }
        add(502, upstream)
        add(503, ["upstream-overloaded"], headers: JSONObject(["Retry-After": header("Seconds until a call may succeed", schema: ["type": .string("integer")])]))
        add(504, ["deadline", "upstream-timeout"])
        // The route's `errors`: statuses it answers with a problem of its own.
        for error in route.response?.errors ?? [] {
            if let index = problems.firstIndex(where: { $0.status == error.status }) {
                if !problems[index].codes.contains("upstream-error") { problems[index].codes.append("upstream-error") }
            } else {
                problems.append((error.status, ["upstream-error"], JSONObject()))
            }
        }
        problems.sort { $0.status < $1.status }
        // A HEAD's answers have no body (RFC 9110 §9.3.2): their media would promise one.
        let bodied = method != "HEAD"
        // A cached route's GET and HEAD answers say what the cache did, and how old a stored one is (docs/caching.md).
        let cached = route.cache != nil && (method == "GET" || method == "HEAD")
        if cached {
            responses.append("304", .object(JSONObject([
                "description": .string("Not Modified: the client's If-None-Match or If-Modified-Since holds for the stored answer"),
                "headers": .object(cacheHeaders),
            ])))
        }
        for (status, codes, headers) in problems {
            var response = JSONObject()
            response.append("description", .string(codes.joined(separator: ", ") + " (the gateway's own answer; the upstream may answer \(status) too)"))
            if !headers.isEmpty { response.append("headers", .object(headers)) }
            let types = codes.map { JSONValue.string("urn:gatewayd:problem:\($0)") }
            let schema: JSONValue = .object(JSONObject(["allOf": .array([
                .object(JSONObject(["$ref": .string("#/components/schemas/Problem")])),
                .object(JSONObject(["properties": .object(JSONObject(["type": .object(JSONObject(["type": .string("string"), "enum": .array(types)]))]))])),
            ])]))
            // The upstream's own answer with this status is what the upstream sends: any media, no schema.
            if bodied { response.append("content", .object(JSONObject([
                Problem.contentType: .object(JSONObject(["schema": schema])),
                "*/*": .object(JSONObject()),
            ]))) }
            responses.append(String(status), .object(response))
        }
        var answer: JSONObject
        if translates, let rule = route.response {
            answer = JSONObject([
                "description": .string("The upstream's answer with its status, its body made JSON by the route's response: (an answer with no body as it came)"),
                "content": .object(JSONObject(["application/json": .object(JSONObject(["schema": .object(answerSchema(rule))]))])),
            ])
        } else {
            answer = JSONObject([
                "description": .string("The upstream's answer, its status and body as the upstream sent them"),
                "content": .object(JSONObject(["*/*": .object(JSONObject())])),
            ])
        }
        if !bodied { answer["content"] = nil }
        if cached { answer.append("headers", .object(cacheHeaders)) }
        responses.append("default", .object(answer))
        return responses
    }

    private static let cacheHeaders = JSONObject([
        "Cache-Status": header("RFC 9211: what the route's cache did, e.g. gatewayd; hit; ttl=42", schema: ["type": .string("string")]),
        "Age": header("Seconds since the stored answer was fresh from the upstream (answers from the store)", schema: ["type": .string("integer")]),
    ])

    /// The client's object as `response.fields` shape it: each field's type
    /// exactly (an answer is converted, not accepted loosely); the fields
    /// always there (required, defaulted, listed) are required. Without
    /// fields, any JSON.
    static func answerSchema(_ rule: AnswerRule) -> JSONObject {
        guard let fields = rule.fields else { return JSONObject() }
        var properties = JSONObject(), required: [JSONValue] = []
        for field in fields {
            var schema: JSONObject = switch field.type {
            case .int?, .timestampMs?: JSONObject(["type": .string("integer")])
            case .number?: JSONObject(["type": .string("number")])
            case .bool?: JSONObject(["type": .string("boolean")])
            case .string?: JSONObject(["type": .string("string")])
            case .file?, nil: JSONObject()
            }
            if field.type == .timestampMs { schema.append("description", .string("epoch milliseconds")) }
            if field.array { schema = JSONObject(["type": .string("array"), "items": .object(schema)]) }
            properties.append(field.name, .object(schema))
            if field.required || field.array || field.defaultValue != nil { required.append(.string(field.name)) }
        }
        var schema = JSONObject(["type": .string("object"), "properties": .object(properties)])
        if !required.isEmpty { schema.append("required", .array(required)) }
        return schema
    }

    private static func header(_ description: String, schema: [String: JSONValue]) -> JSONValue {
        .object(JSONObject(["description": .string(description), "schema": .object(JSONObject(schema.sorted { $0.key < $1.key }.map { .init(key: $0.key, value: $0.value) }))]))
    }

    /// RFC 9457's problem details, as the gateway writes them.
    static var components: JSONObject {
        let string: JSONValue = .object(JSONObject(["type": .string("string")]))
        let problem = JSONObject([
            "type": .string("object"),
            "required": .array(["type", "title", "status", "detail"].map(JSONValue.string)),
            "properties": .object(JSONObject([
                "type": .object(JSONObject(["type": .string("string"), "format": .string("uri")])),
                "title": string,
                "status": .object(JSONObject(["type": .string("integer")])),
                "detail": string,
                "route": string,
                "trace_id": string,
            ])),
        ])
        return JSONObject(["schemas": .object(JSONObject(["Problem": .object(problem)]))])
    }
}
