import Gateway
import GatewayTesting
import Hooks
import Testing

/// The hooks inside a whole gateway, its upstream a closure: no socket, no port.
@Suite struct HooksTests {
    static let config = """
        listeners: [{address: 127.0.0.1:8080}]
        upstreams: {shop: {url: "http://shop.internal"}}
        routes: [{name: shop, upstream: shop}]
        """

    @Test func theModifierSignsWhatTheUpstreamGets() async throws {
        let gateway = try await TestGateway(config: ConfigLoader.load(yaml: Self.config).config, modifiers: [Sign()], validators: [RefuseStale()],
                                            upstreams: ["shop": { request in TestResponse(text: request["X-Signature"] ?? "unsigned") }])
        let answer = try await gateway.execute(TestRequest(target: "/orders?id=7"))
        #expect(answer.status == 200 && answer.text == "signed:GET /orders?id=7")
        try await gateway.shutdown()
    }

    @Test func theValidatorRefusesAStaleAnswer() async throws {
        let gateway = try await TestGateway(config: ConfigLoader.load(yaml: Self.config).config, modifiers: [Sign()], validators: [RefuseStale()],
                                            upstreams: ["shop": { _ in TestResponse(headers: [("X-Stale", "1")], text: "old") }])
        let answer = try await gateway.execute(TestRequest(target: "/orders"))
        #expect(answer.status == 502 && answer.text.contains("validator-failed") && !answer.text.contains("old"))
        try await gateway.shutdown()
    }
}
