import Foundation
import Testing
@testable import Gateway

/// A `rewrite.path` template filled from the client's convenience parameters,
/// configured as operators write it (no `params` entry for the variables):
/// RFC 6570's own examples, level 1 to 4, every operator a path may hold,
/// with the values sent in a JSON body, a form body and a query string, over
/// HTTP/1.1 and h2c. The target asserted is what reached the upstream's socket.
@Suite(.ownThreads) struct TemplateWireTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var template: String
        var expected: String
        /// Only a JSON body can carry an object (a query or form key is taken literally).
        var jsonOnly = false
        var testDescription: String { template }
    }

    /// RFC 6570 §1.2 and §3.2's variables.
    static let variables: [(String, JSONValueLiteral)] = [
        ("var", .string("value")), ("hello", .string("Hello World!")), ("path", .string("/foo/bar")),
        ("x", .number("1024")), ("y", .number("768")), ("list", .list(["red", "green", "blue"])),
        ("keys", .object([("semi", ";"), ("dot", "."), ("comma", ",")])),
    ]

    static let cases: [Case] = [
        // Level 1
        Case(template: "/t/{var}", expected: "/base/t/value"),
        Case(template: "/t/{hello}", expected: "/base/t/Hello%20World%21"),
        // Level 2
        Case(template: "/t/{+hello}", expected: "/base/t/Hello%20World!"),
        Case(template: "/t{+path}/here", expected: "/base/t/foo/bar/here"),
        // Level 3
        Case(template: "/t/{x,y}", expected: "/base/t/1024,768"),
        Case(template: "/t/{+x,hello,y}", expected: "/base/t/1024,Hello%20World!,768"),
        Case(template: "/t{/var,x}/here", expected: "/base/t/value/1024/here"),
        Case(template: "/t{;x,y}", expected: "/base/t;x=1024;y=768"),
        Case(template: "/t{.var}", expected: "/base/t.value"),
        Case(template: "/t{?x,y}", expected: "/base/t?x=1024&y=768"),
        Case(template: "/t?fixed=yes{&x}", expected: "/base/t?fixed=yes&x=1024"),
        // Level 4
        Case(template: "/t/{var:3}", expected: "/base/t/val"),
        Case(template: "/t/{list}", expected: "/base/t/red,green,blue"),
        Case(template: "/t/{list*}", expected: "/base/t/red,green,blue"),
        Case(template: "/t{/list*}", expected: "/base/t/red/green/blue"),
        Case(template: "/t{;list*}", expected: "/base/t;list=red;list=green;list=blue"),
        Case(template: "/t{?list*}", expected: "/base/t?list=red&list=green&list=blue"),
        Case(template: "/t/{keys}", expected: "/base/t/semi,%3B,dot,.,comma,%2C", jsonOnly: true),
        Case(template: "/t{?keys*}", expected: "/base/t?semi=%3B&dot=.&comma=%2C", jsonOnly: true),
    ]

    enum JSONValueLiteral: Sendable {
        case string(String), number(String), list([String]), object([(String, String)])
    }

    /// The values a case's template names, as a JSON object and as a query or form string.
    static func parameters(of template: String) -> (json: String, form: String) {
        // The names inside each expression, without operator or modifiers.
        let names = Set(template.matches(of: /\{[+#.\/;?&]?([^}]*)\}/).flatMap { expression in
            expression.output.1.split(separator: ",").map { String($0.prefix { $0 != "*" && $0 != ":" }) }
        })
        let used = variables.filter { names.contains($0.0) }
        let json = used.map { name, value -> String in
            switch value {
            case .string(let s): "\"\(name)\":\"\(s)\""
            case .number(let n): "\"\(name)\":\(n)"
            case .list(let items): "\"\(name)\":[\(items.map { "\"\($0)\"" }.joined(separator: ","))]"
            case .object(let pairs): "\"\(name)\":{\(pairs.map { "\"\($0.0)\":\"\($0.1)\"" }.joined(separator: ","))}"
            }
        }
        let escape = { (s: String) in s.addingPercentEncoding(withAllowedCharacters: .alphanumerics)! }
        let form = used.flatMap { name, value -> [String] in
            switch value {
            case .string(let s): ["\(name)=\(escape(s))"]
            case .number(let n): ["\(name)=\(n)"]
            case .list(let items): items.map { "\(name)=\($0)" }
            case .object: []
            }
        }
        return ("{" + json.joined(separator: ",") + "}", form.joined(separator: "&"))
    }

    static var routes: String {
        cases.enumerated().map { index, c in
            """
              - name: c\(index)
                match: {methods: [GET, POST], path: /c\(index)}
                upstream: legacy
                rewrite: {method: GET, path: "\(c.template)"}
            """
        }.joined(separator: "\n")
    }

    @Test(arguments: [false, true])
    func templatesFilledFromTheClientsParameters(h2c: Bool) async throws {
        try await Teardown.scope {
            let upstream = RecordingUpstream()
            let port = try await upstream.start()
            let gateway = try await GatewayHarness.start("""
                listeners: [{address: 127.0.0.1:0, protocols: [http1, h2c]}]
                upstreams: {legacy: {url: "http://127.0.0.1:\(port)/base"}}
                routes:
                \(Self.routes)
                """)
            let version = h2c ? ["--http2-prior-knowledge"] : ["--http1.1"]
            for (index, c) in Self.cases.enumerated() {
                let (json, form) = Self.parameters(of: c.template)
                var sent: [(String, [String])] = [
                    ("json", ["-H", "Content-Type: application/json", "--data-binary", json, "\(gateway.base)/c\(index)"]),
                ]
                if !c.jsonOnly {
                    sent.append(("form", ["-H", "Content-Type: application/x-www-form-urlencoded", "--data-binary", form, "\(gateway.base)/c\(index)"]))
                    sent.append(("query", ["\(gateway.base)/c\(index)?\(form)"]))
                }
                for (how, arguments) in sent {
                    let before = upstream.requests.count
                    let result = try curl(version + ["-o", "/dev/null", "-w", "%{http_code}"] + arguments)
                    #expect(result.text == "200", "\(c.template) from \(how): \(result.text)")
                    let requests = upstream.requests
                    #expect(requests.count == before + 1, "\(c.template) from \(how)")
                    let request = try #require(requests.last)
                    #expect(request.method == "GET")
                    #expect(request.uri == c.expected, "\(c.template) from \(how)")
                    #expect(request.body.isEmpty)
                }
            }
        }
    }

    /// The issue's own shape: `POST /user {"id":7,"fields":"a,b"}` becomes
    /// `GET /users/7?fields=a%2Cb`; a parameter the template does not consume
    /// joins the template's query.
    @Test(arguments: [false, true])
    func theMissionsOwnShape(h2c: Bool) async throws {
        try await Teardown.scope {
            let upstream = RecordingUpstream()
            let port = try await upstream.start()
            let yaml = """
                listeners: [{address: 127.0.0.1:0}]
                upstreams: {legacy: {url: "http://127.0.0.1:\(port)"}}
                routes:
                  - name: user
                    match: {methods: [POST], path: /user}
                    upstream: legacy
                    rewrite: {method: GET, path: "/users/{id}{?fields}"}
                """
            let loaded = try ConfigLoader.load(yaml: yaml, file: "t.yaml", environment: [:])
            #expect(loaded.warnings.isEmpty, "\(loaded.warnings)")
            let gateway = try await GatewayHarness.start(yaml)
            let version = h2c ? ["--http2-prior-knowledge"] : ["--http1.1"]
            _ = try curl(version + ["-H", "Content-Type: application/json", "--data-binary", #"{"id":7,"fields":"a,b","lang":"en"}"#,
                                    "\(gateway.base)/user"])
            #expect(upstream.requests.map(\.uri) == ["/users/7?fields=a%2Cb&lang=en"])
        }
    }

    /// On a prefix route a template variable nothing but a client supplies is
    /// a warning pointing at `rewrite.prefix`, not an error: the config loads.
    @Test func aTemplateOnAPrefixRouteWarns() throws {
        let loaded = try ConfigLoader.load(yaml: """
            listeners: [{address: 127.0.0.1:1}]
            routes: [{name: r, upstream: echo, match: {prefix: /api/}, rewrite: {path: '/v2/{+rest}'}}]
            """, file: "t.yaml", environment: [:])
        #expect(loaded.warnings.map(\.description) == [
            "t.yaml:2:76: routes[0].rewrite.path: {rest} is not a capture of match.path nor in rewrite.params, so only a client's parameter fills it: the rest of the prefix is dropped; to keep it, use rewrite.prefix",
        ])
        let declared = try ConfigLoader.load(yaml: """
            listeners: [{address: 127.0.0.1:1}]
            routes: [{name: r, upstream: echo, match: {prefix: /api/}, rewrite: {path: '/v2/{id}', params: {id: {required: true}}}}]
            """, file: "t.yaml", environment: [:])
        #expect(declared.warnings.isEmpty)
    }
}
