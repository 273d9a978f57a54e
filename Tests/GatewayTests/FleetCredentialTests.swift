import Foundation
import NIOConcurrencyHelpers
import NIOCore
import Testing
@testable import Gateway

/// `refresh: {share: fleet}` as operators run it: two gatewayd processes on
/// one real redis-server, a token service that counts its calls and an
/// upstream that takes only the latest token.
@Suite(.serialized, .ownThreads) struct FleetCredentialTests {
    @Test func twoGatewaysRefreshOncePerExpiryBetweenThem() async throws {
        let redis = try RedisServer()
        // Slow enough that both processes are refused before it answers.
        let service = try await TokenService(delay: .milliseconds(300))
        let (issued, auth) = (service.issued, service.auth)
        let yaml = service.config(store: redis.url, timeout: "500ms")
        let gateways = try (0..<2).map { _ in try SpawnedGateway(yaml: yaml) }
        defer { gateways.forEach { $0.stop() } }
        func callBoth() async throws -> [String] {
            try await withThrowingTaskGroup(of: String.self) { group in
                for gateway in gateways {
                    group.addTask { try await curlDetached(["-w", " %{http_code}", "http://127.0.0.1:\(gateway.port)/data"]).text }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
        }
        // No credential anywhere yet: one process refreshes, the other takes its token.
        #expect(try await callBoth() == ["secret data 200", "secret data 200"])
        #expect(issued.withLockedValue { $0 } == 1)
        #expect(try redis.cli(["GET", "gatewayd:cred:protected:auth/token:Authorization"]) == "Bearer tok-1\n")
        // The token expires (the upstream wants a newer one): again one refresh for the pair.
        issued.withLockedValue { $0 += 1 }
        #expect(try await callBoth() == ["secret data 200", "secret data 200"])
        #expect(issued.withLockedValue { $0 } == 3, "one token call for the second expiry too")
        #expect(auth.requests.count == 2)
        for gateway in gateways { #expect(!gateway.log.contains("tok-"), "credentials are never logged") }
    }

    @Test func withTheStoreDownEachGatewayRefreshesAlone() async throws {
        let service = try await TokenService(delay: .zero)
        // Nothing listens where the store should be: the port is bound, never listening, and held to the end, so no
        // other test's server can be there.
        let nobody = loopbackSocket()
        defer { close(nobody.fd) }
        let gateway = try SpawnedGateway(yaml: service.config(store: "redis://127.0.0.1:\(nobody.port)", timeout: "100ms"))
        defer { gateway.stop() }
        #expect(try await curlDetached(["-w", " %{http_code}", "http://127.0.0.1:\(gateway.port)/data"]).text == "secret data 200")
        #expect(service.auth.requests.count == 1)
        #expect(await eventually(timeout: 10) { gateway.log.contains("store: redis at") && gateway.log.contains("is down") }, "\(gateway.log)")
    }
}

/// A token service that counts the tokens it issued, an upstream that
/// takes only the latest, and a route that refreshes through the fleet.
private struct TokenService {
    let issued = NIOLockedValueBox(0)
    let auth: RecordingUpstream
    let app: RecordingUpstream
    let ports: (auth: Int, app: Int)

    init(delay: TimeAmount) async throws {
        let issued = issued
        auth = RecordingUpstream { _ in
            let n = issued.withLockedValue { $0 += 1; return $0 }
            return .respond(status: 200, headers: [("Content-Type", "application/json")],
                            body: Array(#"{"access_token":"tok-\#(n)"}"#.utf8), delay: delay)
        }
        app = RecordingUpstream { request in
            request.header("Authorization") == ["Bearer tok-\(issued.withLockedValue { $0 })"]
                ? .respond(status: 200, headers: [], body: Array("secret data".utf8))
                : .respond(status: 401, headers: [], body: Array("who are you".utf8))
        }
        ports = (try await auth.start(), try await app.start())
    }

    func config(store: String, timeout: String) -> String {
        """
        listeners: [{address: 127.0.0.1:0}]
        logging: {access_log: false}
        store: {redis: {url: "\(store)", timeout: \(timeout)}}
        upstreams:
          app: {url: "http://127.0.0.1:\(ports.app)"}
          auth: {url: "http://127.0.0.1:\(ports.auth)"}
        routes:
          - name: protected
            upstream: app
            retry: {attempts: 2}
            validate:
              - status: 401
                then:
                  refresh:
                    request: {upstream: auth, path: /token, body: {client_secret: s3cret}}
                    capture: {pointer: /access_token, header: Authorization, format: "Bearer {}"}
                    min_interval: 0s
                    share: fleet
        """
    }
}
