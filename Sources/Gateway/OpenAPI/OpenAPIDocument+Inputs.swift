import Rewriter

extension OpenAPIDocument {
    /// What a client sends a route for one method: the convenience
    /// parameters (`rewrite.params` by their client-side names, constants
    /// left out, and the template variables no entry declares), in the query
    /// or in a JSON or form body as `rewrite.from` and the method say; a
    /// pass-through route's body as it is.
    struct Inputs {
        struct Property {
            let name: String
            let required: Bool
            let schema: JSONObject
        }

        let properties: [Property]
        /// The parameters are query parameters (else a request body).
        let inQuery: Bool
        /// A body reaches the gateway (and its limits) for this method.
        let takesBody: Bool
        let requestBody: JSONObject?

        init(route: RouteConfig, method: String) {
            guard let rule = route.rewrite else {
                properties = []
                inQuery = false
                takesBody = !OpenAPIDocument.queryMethods.contains(method)
                // A pass-through route forwards any body byte for byte.
                requestBody = takesBody ? JSONObject(["content": .object(JSONObject(["*/*": .object(JSONObject())]))]) : nil
                return
            }
            var properties: [Property] = []
            let captures: [String] = if case .pattern(let pattern) = route.match.path { pattern.captureNames } else { [] }
            for param in rule.params where param.value == nil {
                let name = param.from ?? param.name
                guard !captures.contains(name), !properties.contains(where: { $0.name == name }) else { continue }
                var schema = Self.schema(param.type)
                if let value = param.defaultValue { schema.append("default", value) }
                properties.append(Property(name: name, required: param.required && param.defaultValue == nil, schema: schema))
            }
            // A template variable no entry declares is filled from a client's parameter of its name.
            let declared = Set(rule.params.map(\.name))
            for name in rule.path?.variableNames ?? [] where !declared.contains(name) && !captures.contains(name) && !properties.contains(where: { $0.name == name }) {
                properties.append(Property(name: name, required: false, schema: JSONObject()))
            }
            self.properties = properties
            inQuery = rule.from == .query || (rule.from == .auto && OpenAPIDocument.queryMethods.contains(method))
            takesBody = !inQuery
            guard takesBody else {
                requestBody = nil
                return
            }
            var object = JSONObject(["type": .string("object")])
            object.append("properties", .object(JSONObject(properties.map { .init(key: $0.name, value: .object($0.schema)) })))
            let required = properties.filter(\.required).map { JSONValue.string($0.name) }
            if !required.isEmpty { object.append("required", .array(required)) }
            let media = JSONValue.object(JSONObject(["schema": .object(object)]))
            var body = JSONObject()
            if !required.isEmpty { body.append("required", .bool(true)) }
            body.append("content", .object(JSONObject(["application/json": media, "application/x-www-form-urlencoded": media])))
            requestBody = body
        }

        /// A parameter's type as JSON Schema: what the gateway accepts for it,
        /// from a JSON body (a number's digits in a string convert too) and
        /// from a query or form (where every value is a string).
        static func schema(_ type: ParamType?) -> JSONObject {
            switch type {
            case nil: JSONObject()
            case .string: JSONObject(["type": .string("string")])
            case .int:
                JSONObject(["type": .array([.string("integer"), .string("string")]), "pattern": .string("^[+-]?[0-9]+$")])
            case .number:
                JSONObject(["type": .array([.string("number"), .string("string")]),
                            "pattern": .string("^[+-]?([0-9]+([.][0-9]*)?|[.][0-9]+)([eE][+-]?[0-9]+)?$")])
            case .bool:
                JSONObject(["type": .array([.string("boolean"), .string("string")]),
                            "enum": .array([.bool(true), .bool(false), .string("true"), .string("false"), .string("1"), .string("0")])])
            case .timestampMs:
                // An RFC 3339 date-time or date, or integer epoch milliseconds.
                JSONObject(["type": .array([.string("string"), .string("integer")]), "format": .string("date-time"),
                            "x-gatewayd-type": .string("timestamp_ms")])
            case .file:
                // Sent in JSON as a data: URI or {filename, content_type, base64}; the upstream gets a multipart file part.
                JSONObject(["oneOf": .array([
                    .object(JSONObject(["type": .string("string"), "pattern": .string("^data:")])),
                    .object(JSONObject([
                        "type": .string("object"), "required": .array([.string("base64")]),
                        "properties": .object(JSONObject([
                            "filename": .object(JSONObject(["type": .string("string")])),
                            "content_type": .object(JSONObject(["type": .string("string")])),
                            "base64": .object(JSONObject(["type": .string("string"), "contentEncoding": .string("base64")])),
                        ])),
                    ])),
                ]), "x-gatewayd-type": .string("file")])
            }
        }
    }
}
