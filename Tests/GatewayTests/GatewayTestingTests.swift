import Foundation
import Gateway
import GatewayTesting
import Testing

/// GatewayTesting as an embedder's tests use it: the gateway in process,
/// upstreams as closures, no socket; what the closures received is what a
/// real upstream would have.
@Suite struct GatewayTestingTests {
    struct Sign: RequestModifier {
        func modify(_ request: inout UpstreamRequest, context: ModifierContext) async throws {
            request.headers.set("X-Signature", "signed:\(request.method) \(request.target)")
        }
    }

    struct RefuseStale: ResponseValidator {
        func validate(_ outcome: TryOutcome, route: String) -> ValidatorSpec.Action {
            guard case .response(_, let headers, _) = outcome, headers["X-Stale"] != nil else { return .next }
            return .fail
        }
    }

    static let config = """
        listeners: [{address: 127.0.0.1:8080}]
        upstreams: {app: {url: "http://app.internal:9000/base"}, ghost: {url: "http://ghost.internal"}}
        routes:
          - {name: echo, match: {prefix: /echo/}, upstream: echo}
          - {name: ghost, match: {prefix: /ghost/}, upstream: ghost}
          - {name: app, upstream: app, retry: {attempts: 2, on: [503]}}
        """

    @Test func hooksRetriesAndFailuresRunAgainstAClosure() async throws {
        let seen = Seen()
        let gateway = try await TestGateway(config: ConfigLoader.load(yaml: Self.config).config, modifiers: [Sign()], validators: [RefuseStale()],
                                            upstreams: ["app": { request in
            await seen.add(request)
            switch request.target {
            case "/base/orders?id=7": return TestResponse(text: "order 7")
            case "/base/stale": return TestResponse(headers: [("X-Stale", "1")], text: "old")
            case "/base/busy": return await seen.count == 3 ? TestResponse(status: 503, text: "busy") : TestResponse(text: "second try")
            default: throw TestGatewayError(message: "unexpected")
            }
        }])
        // The modifier's header on what the upstream got, with the upstream's base path and authority.
        let order = try await gateway.execute(TestRequest(target: "/orders?id=7"))
        #expect(order.status == 200 && order.text == "order 7")
        let first = try #require(await seen.requests.first)
        #expect(first["X-Signature"] == "signed:GET /base/orders?id=7" && first["Host"] == "app.internal:9000")
        // The embedder's validator refuses; the route's retry sends again.
        let stale = try await gateway.execute(TestRequest(target: "/stale"))
        #expect(stale.status == 502 && stale.text.contains("validator-failed"))
        let retried = try await gateway.execute(TestRequest(target: "/busy"))
        #expect(retried.status == 200 && retried.text == "second try")
        #expect(await seen.count == 4)
        // A POST's body reaches the closure as sent; a closure that throws is the upstream's 500.
        let posted = try await gateway.execute(TestRequest(method: "POST", target: "/nowhere", body: Array("x=1".utf8)))
        let lastBody = await seen.requests.last?.body
        #expect(posted.status == 500 && lastBody == Array("x=1".utf8))
        // The built-in echo; an upstream no closure answers fails its connect (502), the gateway lives.
        #expect(try await gateway.execute(TestRequest(target: "/echo/a")).text.contains(#""path":"/echo/a""#))
        let ghost = try await gateway.execute(TestRequest(target: "/ghost/x"))
        #expect(ghost.status == 502 && ghost.text.contains("upstream-connect-failure") && !ghost.text.contains("ghost.internal"),
                Comment(rawValue: ghost.text))
        #expect(try await gateway.execute(TestRequest(target: "/echo/b")).status == 200)
        try await gateway.shutdown()
    }

    /// config/examples/soap-users.yaml as shipped, its SOAP service a closure.
    @Test func theSOAPExampleAgainstAClosure() async throws {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("config/examples/soap-users.yaml").path
        let seen = Seen()
        let gateway = try await TestGateway(config: ConfigLoader.load(file: file).config, upstreams: ["users": { request in
            await seen.add(request)
            let known = String(decoding: request.body, as: UTF8.self).contains("<id>7</id>")
            let body = known
                ? "<GetUserResult><id>7</id><name>Ann</name><tags><string>ops</string></tags><created>2024-05-01T12:30:00Z</created></GetUserResult>"
                : "<soap:Fault><faultcode>soap:Client</faultcode><faultstring>no user 8</faultstring></soap:Fault>"
            let envelope = #"<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body>"#
                + (known ? #"<GetUserResponse xmlns="urn:users">\#(body)</GetUserResponse>"# : body) + "</soap:Body></soap:Envelope>"
            return TestResponse(status: known ? 200 : 500, headers: [("Content-Type", "text/xml; charset=utf-8")], text: envelope)
        }])
        let user = try await gateway.execute(TestRequest(target: "/users/7"))
        #expect(user.status == 200 && user.text == #"{"id":7,"name":"Ann","tags":["ops"],"since":1714566600000}"#, Comment(rawValue: user.text))
        let sent = try #require(await seen.requests.first)
        #expect(sent.method == "POST" && sent["SOAPAction"] == "\"GetUser\"" && String(decoding: sent.body, as: UTF8.self).contains("<id>7</id>"))
        // Cached for a minute: the second call never reaches the service.
        #expect(try await gateway.execute(TestRequest(target: "/users/7")).text == user.text)
        #expect(await seen.count == 1)
        let missing = try await gateway.execute(TestRequest(target: "/users/8"))
        #expect(missing.status == 404 && missing.text.contains("no user 8"), Comment(rawValue: missing.text))
        try await gateway.shutdown()
    }

    actor Seen {
        var requests: [TestRequest] = []
        var count: Int { requests.count }
        func add(_ request: TestRequest) { requests.append(request) }
    }
}
