import Foundation
import Testing
@testable import Gateway

/// Every file in config/ loads and checks, so examples never rot.
@Suite(.ownThreads) struct ConfigFilesTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let environment = ["REPORTS_KEY": "k-123", "CLIENT_SECRET": "s3cret"]

    static var configFiles: [String] {
        let dir = root.appendingPathComponent("config")
        let examples = (try? FileManager.default.contentsOfDirectory(atPath: dir.appendingPathComponent("examples").path)) ?? []
        return ["gatewayd.yaml"] + examples.filter { $0.hasSuffix(".yaml") }.sorted().map { "examples/\($0)" }
    }

    @Test func findsTheExamples() {
        #expect(Self.configFiles.contains("examples/legacy-form-sidecar.yaml"))
        #expect(Self.configFiles.contains("examples/header-injection.yaml"))
        #expect(Self.configFiles.contains("examples/retries.yaml"))
    }

    @Test func anUpgradedRouteSaysWhatDoesNotApplyAndWhatCannotBe() throws {
        let loaded = try ConfigLoader.load(yaml: """
            listeners: [{address: 127.0.0.1:0}]
            upstreams: {ws: {url: "http://127.0.0.1:9000"}}
            routes: [{name: a, upstream: ws, upgrade: [websocket], rewrite: {encoding: query}}]
            """)
        #expect(loaded.warnings.map(\.description).contains { $0.contains("routes[0].upgrade: request rewriting and body validators do not apply") })
        #expect(throws: ConfigError.self) {
            try ConfigLoader.load(yaml: """
                listeners: [{address: 127.0.0.1:0}]
                upstreams: {h2: {url: "http://127.0.0.1:9001", http2: true}}
                routes: [{name: b, upstream: h2, upgrade: [websocket]}]
                """)
        }
    }

    /// One example per endpoint feature, read as documented.
    @Test func theEndpointExamplesSayWhatTheyShow() throws {
        func upstream(_ file: String) throws -> UpstreamConfig {
            try #require(ConfigLoader.load(file: Self.root.appendingPathComponent("config/examples/\(file)").path, environment: [:]).config.upstreams.first)
        }
        let balanced = try upstream("load-balancing.yaml")
        #expect(balanced.endpoints.count == 2 && balanced.balance == .leastRequest)
        let checked = try upstream("health-checks.yaml")
        #expect(checked.healthCheck?.path == "/health" && checked.healthCheck?.validate.count == 1 && checked.healthCheck?.unhealthyThreshold == 3)
        let ejecting = try upstream("outlier-detection.yaml")
        #expect(ejecting.outlier?.on.contains(.validator) == true && ejecting.outlier?.consecutiveFailures == 5)
        let limits = try ConfigLoader.load(file: Self.root.appendingPathComponent("config/examples/rate-limits.yaml").path, environment: [:]).config
        #expect(limits.routes.compactMap(\.rateLimit).map(\.key) == [.clientIP, .header("X-Api-Key")])
        let tracing = try ConfigLoader.load(file: Self.root.appendingPathComponent("config/examples/tracing.yaml").path, environment: [:]).config
        #expect(tracing.tracing == TracingConfig(propagate: true, start: true))
        let websocket = try ConfigLoader.load(file: Self.root.appendingPathComponent("config/examples/websocket.yaml").path, environment: [:]).config
        #expect(websocket.routes.map(\.upgrade) == [["websocket"], []])
        let shedding = try upstream("circuit-breaking.yaml")
        #expect(shedding.maxPending == 50 && shedding.maxRequests == 200)
    }

    @Test(arguments: configFiles)
    func loads(file: String) throws {
        let loaded = try ConfigLoader.load(file: Self.root.appendingPathComponent("config/\(file)").path, environment: Self.environment)
        #expect(!loaded.config.routes.isEmpty)
        #expect(!loaded.config.listeners.isEmpty)
    }

    @Test(arguments: configFiles)
    func checksWithNothingInTheEnvironment(file: String) throws {
        _ = try ConfigLoader.load(file: Self.root.appendingPathComponent("config/\(file)").path, environment: [:])
    }

    @Test func anEnvironmentDefaultAppliesWhenTheVariableIsUnsetOrEmpty() throws {
        let yaml = """
            listeners: [{address: 127.0.0.1:0}]
            routes: [{name: r, upstream: echo, headers: {set: {X-Key: "${env:KEY:-fallback}"}}}]
            """
        for (environment, expected) in [([:], "fallback"), (["KEY": ""], "fallback"), (["KEY": "given"], "given")] {
            let config = try ConfigLoader.load(yaml: yaml, environment: environment).config
            #expect(config.routes[0].headers.set.first?.value == expected)
        }
    }

    @Test func checkWarnsWhenAValidatorDecidesARetryStatusFirst() throws {
        let yaml = { (order: String) in """
            listeners: [{address: 127.0.0.1:0}]
            routes:
              - name: r
                upstream: echo
                retry: {attempts: 2, on: [503, 500-599]}
                validate: \(order)
            """
        }
        let failsFirst = try ConfigLoader.load(yaml: yaml("[{status: 200-299, else: fail}]"), file: "t.yaml")
        #expect(failsFirst.warnings.map(\.description) == [
            "t.yaml:5:12: routes[0].retry.on: 503 is never retried: routes[0].validate[0] (status 200-299) decides it first; put that status in its range, or the retry before it",
            "t.yaml:5:12: routes[0].retry.on: 500 is never retried: routes[0].validate[0] (status 200-299) decides it first; put that status in its range, or the retry before it",
        ])
        let retriesFirst = try ConfigLoader.load(yaml: yaml("[{status: 500-599, then: retry}, {status: 200-299, else: fail}]"))
        #expect(retriesFirst.warnings.isEmpty)
        for file in Self.configFiles {
            #expect(try ConfigLoader.load(file: Self.root.appendingPathComponent("config/\(file)").path).warnings.isEmpty, "\(file)")
        }
    }

    @Test func eachBodyLimitAndThePoolIdleTimeoutAreTheirOwnKeys() throws {
        let config = try ConfigLoader.load(yaml: """
            listeners: [{address: 127.0.0.1:0}]
            limits: {max_body_bytes: 10, max_response_body_bytes: 20, max_refresh_body_bytes: 30}
            upstreams: {app: {url: "http://127.0.0.1:1", idle_timeout: 2s}}
            routes: [{name: app, upstream: app}]
            """).config
        #expect(config.limits.maxBodyBytes == 10 && config.limits.maxResponseBodyBytes == 20 && config.limits.maxRefreshBodyBytes == 30)
        #expect(config.upstreams[0].idleTimeout == .seconds(2))
        // The default config states the defaults.
        let defaults = try ConfigLoader.load(file: Self.root.appendingPathComponent("config/gatewayd.yaml").path).config.limits
        #expect(defaults == Limits())
    }

    @Test func defaultConfigUsesOnlyEchoAndIsLoopback() throws {
        let config = try ConfigLoader.load(file: Self.root.appendingPathComponent("config/gatewayd.yaml").path).config
        #expect(config.routes.allSatisfy { $0.upstream == "echo" })
        #expect(config.listeners.map(\.address.description) == ["127.0.0.1:8080"])
        #expect(config.listeners[0].protocols == [.http1, .h2c])
    }

    @Test func interpolatedSecretsAreRecorded() throws {
        let loaded = try ConfigLoader.load(
            file: Self.root.appendingPathComponent("config/examples/header-injection.yaml").path, environment: Self.environment)
        #expect(loaded.secrets.contains("k-123"))
        #expect(loaded.secrets.contains("dXNlcjpwYXNz"))
        let billing = loaded.config.upstream(named: "billing")!
        #expect(billing.headers.set.first?.value == "Basic dXNlcjpwYXNz")
    }

    @Test func retriesExampleCompilesToPolicy() throws {
        let config = try ConfigLoader.load(
            file: Self.root.appendingPathComponent("config/examples/retries.yaml").path, environment: Self.environment).config
        let flaky = config.routes[0]
        #expect(flaky.retry?.attempts == 3)
        #expect(flaky.retry?.on == RetryPolicy.defaultConditions)
        #expect(flaky.retry?.backoff == .init(strategy: .exponential, base: .milliseconds(25), max: .seconds(1), jitter: true))
        #expect(flaky.retry?.budget == .init(ratio: 0.2, window: .seconds(10), minRetries: 3))
        #expect(flaky.timeout == .seconds(5))
        #expect(flaky.validate.map(\.then) == [.retry, .next, .next, .next])
        #expect(flaky.validate.map(\.otherwise) == [.next, .fail, .retry, .pass])
        guard case .refresh(let refresh) = config.routes[1].validate[0].then else {
            Issue.record("expected a refresh action")
            return
        }
        #expect(refresh.captureHeader == "Authorization")
        #expect(refresh.format == "Bearer {}")
        #expect(refresh.body == ["client_id": "gatewayd", "client_secret": "s3cret"])
        #expect(refresh.minInterval == .seconds(5))
    }
}
