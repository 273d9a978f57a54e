import Foundation
import NIOConcurrencyHelpers
import Testing
@testable import Gateway

/// The built binary as systemd and operators drive it: notifications,
/// reload under load, graceful drain, the admin endpoint, logs.
@Suite(.serialized, .ownThreads) struct OperationsTests {
    private static func writeConfig(_ yaml: String, to url: URL) throws {
        // Written whole, then renamed: a reload never reads half a file.
        try yaml.write(to: url, atomically: true, encoding: .utf8)
    }

    private static func tempFile(_ name: String) -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("gatewayd-ops-\(getpid())-\(name)")
    }

    private static func versioned(_ version: String, extra: String = "") -> String {
        """
        listeners: [{address: 127.0.0.1:0}]
        admin: {address: 127.0.0.1:0}
        \(extra)
        routes:
          - name: v\(version)
            upstream: echo
            response_headers: {set: {X-Version: "\(version)"}}
        """
    }

    @Test(arguments: [false, true]) func notifiesSystemdAroundStartReloadAndStop(abstract: Bool) throws {
        let notify = try NotifySocket(abstract: abstract)
        let config = Self.tempFile("notify-\(abstract).yaml")
        try Self.writeConfig(Self.versioned("a"), to: config)
        defer { try? FileManager.default.removeItem(at: config) }
        let gateway = try SpawnedGateway(config: config.path, environment: ["NOTIFY_SOCKET": notify.name])
        defer { gateway.stop() }

        let ready = try #require(notify.receive(until: "READY=1", timeout: 10))
        #expect(ready.last!.contains("STATUS=serving"))
        gateway.signal(SIGHUP)
        let reload = try #require(notify.receive(until: "READY=1", timeout: 10))
        let reloading = try #require(reload.first { $0.contains("RELOADING=1") })
        let usec = reloading.split(separator: "\n").first { $0.hasPrefix("MONOTONIC_USEC=") }.flatMap { Int64($0.dropFirst(15)) }
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let nowUsec = Int64(now.tv_sec) * 1_000_000 + Int64(now.tv_nsec) / 1000
        #expect(usec.map { $0 <= nowUsec && nowUsec - $0 < 10_000_000 } == true, "MONOTONIC_USEC is CLOCK_MONOTONIC in µs")
        gateway.signal(SIGTERM)
        #expect(notify.receive(until: "STOPPING=1", timeout: 10) != nil)
        #expect(gateway.waitForExit(timeout: 10) == 0)
    }

    @Test func reloadUnderLoadFailsNoCallAndABrokenConfigKeepsTheOld() async throws {
        let config = Self.tempFile("reload.yaml")
        try Self.writeConfig(Self.versioned("a"), to: config)
        defer { try? FileManager.default.removeItem(at: config) }
        let gateway = try SpawnedGateway(config: config.path)
        defer { gateway.stop() }
        let base = "http://127.0.0.1:\(gateway.port)"

        // Two curl clients (HTTP/1.1, 150 calls at 50 per second each on one
        // kept-alive connection) and h2load (two h2c connections, one stream
        // at a time, for 3 seconds), with a reload a second in.
        let clients = (0..<2).map { client in
            var arguments = ["-s", "--rate", "50/s", "-w", "%{http_code} %header{x-version}\n"]
            for i in 0..<150 { arguments += ["\(base)/call/\(client)/\(i)", "-o", "/dev/null"] }
            return ("/usr/bin/curl", arguments)
        } + [("/usr/bin/h2load", ["-c", "2", "-m", "1", "-D", "3", "\(base)/h2"])]
        let loads = try clients.map { try BackgroundPeer($0, $1) }
        // The reload lands once calls are flowing (their access lines say so), however slowly the peers started.
        #expect(await eventually(timeout: 30) { gateway.log.components(separatedBy: "route=va ").count > 20 })
        try Self.writeConfig(Self.versioned("b"), to: config)
        gateway.signal(SIGHUP)
        let outputs = loads.map { $0.finish() }
        let results = outputs[0..<2].flatMap { $0.split(separator: "\n") }
        #expect(results.count == 300)
        #expect(results.allSatisfy { $0 == "200 a" || $0 == "200 b" }, "every call answered: \(Set(results))")
        #expect(results.contains("200 a") && results.contains("200 b"), "the reload landed mid-load")
        let h2load = outputs[2]
        let done = h2load.firstMatch(of: /requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, 0 failed, 0 errored, 0 timeout/)
        #expect(done.map { $0.1 == $0.3 && Int($0.1)! > 100 } == true, "h2c calls all succeeded: \(h2load)")
        #expect(h2load.contains("0 4xx, 0 5xx"))

        // A config that does not check: the old one keeps serving, each problem logged.
        try Self.writeConfig(Self.versioned("c").replacingOccurrences(of: "upstream: echo", with: "upstream: nowhere"), to: config)
        gateway.signal(SIGHUP)
        #expect(await eventually(timeout: 30) { gateway.log.contains("unknown upstream 'nowhere'") })
        #expect(try curl(["-s", "-D", "-", "-o", "/dev/null", "\(base)/after"]).text.lowercased().contains("x-version: b"))
        let admin = try #require(gateway.adminPort)
        let refused = try curl(["-i", "-X", "POST", "http://127.0.0.1:\(admin)/reload"]).text
        #expect(refused.hasPrefix("HTTP/1.1 422 Unprocessable Entity\r\n"))
        #expect(refused.contains("routes[0].upstream: unknown upstream 'nowhere'"))
        #expect(gateway.process.isRunning)
    }

    /// A reload that builds a compiled filter while the daemon holds 1,500
    /// client connections (Foundation's Process, which started the compiler
    /// before, read past its listing of that many descriptors): the new
    /// filter runs, and the connections held through it still answer.
    @Test func aReloadCompilesAFilterWhileThousandsOfConnectionsAreOpen() async throws {
        raiseDescriptorLimit(to: 8192)
        let upstream = RecordingUpstream()
        let port = try await upstream.start()
        let config = Self.tempFile("compile.yaml")
        // A cache of its own: the reload builds the module rather than finding it built.
        let cache = Self.tempFile("cache-\(UUID())")
        defer { for file in [config, cache] { try? FileManager.default.removeItem(at: file) } }
        let base = """
            listeners: [{address: 127.0.0.1:0}]
            limits: {header_timeout: 60s}
            upstreams: {app: {url: "http://127.0.0.1:\(port)"}}
            """
        try Self.writeConfig(base + "\nroutes: [{name: app, upstream: app}]", to: config)
        let gateway = try SpawnedGateway(config: config.path, environment: ["XDG_CACHE_HOME": cache.path])
        defer { gateway.stop() }

        let held = (0..<1500).compactMap { _ in loopbackConnection(port: gateway.port) }
        defer { for fd in held { close(fd) } }
        #expect(held.count == 1500)
        let descriptors = { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(gateway.process.pid)/fd").count) ?? 0 }
        #expect(await eventually(timeout: 30) { descriptors() > 1500 }, "\(descriptors()) descriptors")

        try Self.writeConfig(base + """

            filters:
              sign: {wasm: \(try WasmFilter.file(WasmFilter.sign)), engine: compiled}
            routes: [{name: app, upstream: app, filters: [sign]}]
            """, to: config)
        gateway.signal(SIGHUP)
        #expect(await eventually(timeout: 60) { gateway.log.contains("config reloaded") }, "\(gateway.log)")
        #expect(try curl(["-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(gateway.port)/new"]).text == "200")
        #expect(upstream.requests.first { $0.uri == "/new" }?.header("x-signed") == ["yes"])
        // Every hundredth held connection is asked a call: answered, by the config it was accepted under.
        for fd in stride(from: 0, to: held.count, by: 100).map({ held[$0] }) {
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let request = Array("GET /held HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
            #expect(send(fd, request, request.count, 0) == request.count)
            var buffer = [UInt8](repeating: 0, count: 12)
            #expect(recv(fd, &buffer, buffer.count, Int32(MSG_WAITALL)) == 12 && String(decoding: buffer, as: UTF8.self) == "HTTP/1.1 200")
        }
        #expect(upstream.requests.filter { $0.uri == "/held" }.count == 15)
        #expect(gateway.process.isRunning)
    }

    @Test func sigtermLetsCallsInFlightFinishThenExitsZero() async throws {
        let upstream = RecordingUpstream { _ in .respond(status: 200, headers: [], body: Array("slow answer".utf8), delay: .milliseconds(1500)) }
        let upstreamPort = try await upstream.start()
        let config = Self.tempFile("drain.yaml")
        try Self.writeConfig("""
            listeners: [{address: 127.0.0.1:0}]
            admin: {address: 127.0.0.1:0}
            limits: {drain_timeout: 10s}
            upstreams: {slow: {url: "http://127.0.0.1:\(upstreamPort)"}}
            routes: [{name: slow, upstream: slow}]
            """, to: config)
        defer { try? FileManager.default.removeItem(at: config) }
        let gateway = try SpawnedGateway(config: config.path)
        defer { gateway.stop() }
        let base = "http://127.0.0.1:\(gateway.port)"

        let curlFlags = ["-s", "--max-time", "10"]
        let calls = try [
            BackgroundPeer("/usr/bin/curl", curlFlags + ["-i", "\(base)/slow"]),
            BackgroundPeer("/usr/bin/curl", curlFlags + ["-i", "--http2-prior-knowledge", "\(base)/slow"]),
            BackgroundPeer("/usr/bin/curl", curlFlags + ["-i", "\(base)/slow"]),
            BackgroundPeer("/usr/bin/nghttp", ["-v", "\(base)/slow"]),
        ]
        #expect(await eventually(timeout: 30) { upstream.requests.count >= 4 })
        gateway.signal(SIGTERM)
        // Not ready while the calls in flight finish (the admin endpoint answers until they have).
        let admin = try #require(gateway.adminPort)
        #expect(try await eventually(timeout: 10) {
            try curl(["-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(admin)/readyz"]).text == "503"
        })
        // No longer accepting: a new connection is refused.
        #expect(try await eventually(timeout: 10) { try curl(["\(base)/late"]).status == 7 })
        for (index, call) in calls.enumerated() {
            let text = call.finish()
            switch index {
            case 3:
                // HTTP/2: a GOAWAY announces the end, the stream in flight still completes.
                #expect(text.contains("recv GOAWAY frame"), "\(text)")
                #expect(text.contains("recv DATA frame <length=11, flags=0x00, stream_id=13>")
                    || text.contains("recv DATA frame <length=11, flags=0x01, stream_id=13>"), "\(text)")
            case 1:
                #expect(text.hasSuffix("slow answer"), "call \(index): \(text)")
            default:
                #expect(text.hasSuffix("slow answer"), "call \(index): \(text)")
                #expect(text.lowercased().contains("connection: close"), "HTTP/1.1 is told the connection ends")
            }
        }
        #expect(gateway.waitForExit(timeout: 10) == 0)
        #expect(gateway.log.contains("draining"))
    }

    @Test func aSecondSignalDoesNotWaitForTheDrain() async throws {
        let upstream = RecordingUpstream { _ in .respond(status: 200, headers: [], body: Array("late".utf8), delay: .seconds(8)) }
        let upstreamPort = try await upstream.start()
        let config = Self.tempFile("second-signal.yaml")
        try Self.writeConfig("""
            listeners: [{address: 127.0.0.1:0}]
            limits: {drain_timeout: 30s}
            upstreams: {slow: {url: "http://127.0.0.1:\(upstreamPort)"}}
            routes: [{name: slow, upstream: slow}]
            """, to: config)
        defer { try? FileManager.default.removeItem(at: config) }
        let gateway = try SpawnedGateway(config: config.path)
        defer { gateway.stop() }
        let call = try BackgroundPeer("/usr/bin/curl", ["-s", "-o", "/dev/null", "--max-time", "15", "http://127.0.0.1:\(gateway.port)/slow"])
        defer { call.process.signal(SIGTERM) }
        #expect(await eventually(timeout: 30) { !upstream.requests.isEmpty })
        gateway.signal(SIGTERM)
        // Draining: the slow call holds the process (up to drain_timeout).
        #expect(gateway.waitForExit(timeout: 1) == nil)
        gateway.signal(SIGTERM)
        #expect(gateway.waitForExit(timeout: 3) == 1)
        #expect(gateway.log.contains("exiting without waiting"))
    }

    /// systemd socket activation: the listening socket is bound before the
    /// process starts (here by a wrapper that then execs gatewayd in the
    /// same process, as systemd does) and passed as descriptor 3.
    @Test func listensOnASocketFromSystemd() throws {
        let config = Self.tempFile("activation.yaml")
        let wrapper = """
            import os, socket, sys
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            s.listen(128)
            port = s.getsockname()[1]
            with open(sys.argv[2], "w") as f:
                f.write("listeners: [{address: 127.0.0.1:%d}]\\nroutes: [{name: echo, upstream: echo}]\\n" % port)
            os.dup2(s.fileno(), 3)
            os.set_inheritable(3, True)
            env = dict(os.environ, LISTEN_FDS="1", LISTEN_PID=str(os.getpid()))
            os.execve(sys.argv[1], [sys.argv[1], "run", "-c", sys.argv[2]], env)
            """
        defer { try? FileManager.default.removeItem(at: config) }
        let gateway = try SpawnedGateway(config: config.path,
                                         command: ["/usr/bin/python3", "-c", wrapper, ExplainCommandTests.binary, config.path])
        defer { gateway.stop() }
        // Binding the address again in the same process would have failed: the inherited socket serves.
        let yaml = try String(contentsOf: config, encoding: .utf8)
        #expect(yaml.contains("127.0.0.1:\(gateway.port)}]"))
        #expect(try curl(["http://127.0.0.1:\(gateway.port)/activated"]).text.contains(#""path":"/activated""#))
    }

    @Test func metricsAndRedactedConfigOnTheAdminEndpoint() throws {
        let secret = "s3cr3t-\(UInt32.random(in: 0...UInt32.max))"
        let config = Self.tempFile("admin.yaml")
        try Self.writeConfig("""
            listeners: [{address: 127.0.0.1:0}]
            admin: {address: 127.0.0.1:0}
            logging: {format: json}
            routes:
              - name: hello
                upstream: echo
                # the key is \(secret), should anyone ask
                headers: {set: {X-Api-Key: "${env:GATEWAYD_TEST_KEY}"}}
            """, to: config)
        defer { try? FileManager.default.removeItem(at: config) }
        let gateway = try SpawnedGateway(config: config.path, environment: ["GATEWAYD_TEST_KEY": secret])
        defer { gateway.stop() }
        let admin = "http://127.0.0.1:\(try #require(gateway.adminPort))"

        #expect(try curl(["\(admin)/healthz"]).text == "ok\n")
        #expect(try curl(["\(admin)/readyz"]).text == "ready\n")
        func calls() throws -> Double {
            let text = try curl(["\(admin)/metrics"]).text
            for line in text.split(separator: "\n") where !line.hasPrefix("#") {
                // Prometheus text format: name{label="value",...} value
                #expect(line.wholeMatch(of: /[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? -?[0-9.e+Inf]+/) != nil,
                        "not Prometheus text: \(line)")
            }
            let line = text.split(separator: "\n").first { $0.hasPrefix(#"gatewayd_requests_total{route="hello",method="GET",status_class="2xx"}"#) }
            return line.flatMap { Double($0.split(separator: " ").last!) } ?? 0
        }
        let before = try calls()
        for _ in 1...3 { #expect(try curl(["http://127.0.0.1:\(gateway.port)/x"]).text.contains(secret)) }
        #expect(try calls() == before + 3)
        let metrics = try curl(["\(admin)/metrics"]).text
        // Every metric of the gateway's is described: a # HELP line right before its # TYPE line.
        let exposition = metrics.split(separator: "\n")
        let typed = exposition.indices.filter { exposition[$0].hasPrefix("# TYPE gatewayd_") }
        #expect(typed.count >= 5 && typed.allSatisfy { $0 > 0 && exposition[$0 - 1].hasPrefix("# HELP \(exposition[$0].split(separator: " ")[2]) ") },
                "\(metrics)")
        for name in ["gatewayd_request_duration_seconds_bucket", "gatewayd_active_connections", "gatewayd_build_info"] {
            #expect(metrics.contains(name))
        }

        let shown = try curl(["\(admin)/config"]).text
        #expect(shown.contains("${env:GATEWAYD_TEST_KEY}"))
        #expect(shown.contains("the key is <redacted>"))
        #expect(!shown.contains(secret))
        #expect(try curl(["-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "\(admin)/metrics"]).text == "405")
        #expect(try curl(["-i", "-X", "POST", "\(admin)/healthz"]).text.contains("\r\nAllow: GET, HEAD\r\n"))
        #expect(try curl(["-i", "\(admin)/reload"]).text.contains("\r\nAllow: POST\r\n"))

        // JSON log lines, none of them holding the secret.
        gateway.signal(SIGTERM)
        #expect(gateway.waitForExit(timeout: 10) == 0)
        let lines = gateway.log.split(separator: "\n")
        #expect(lines.count >= 4)
        for line in lines {
            #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) is [String: Any], "not a JSON line: \(line)")
            #expect(!line.contains(secret))
        }
    }

    @Test func theAdminTokenGuardsConfigRoutesAndReload() throws {
        let token = "tok-\(UInt64.random(in: 1...UInt64.max))-0123456789"
        let config = Self.tempFile("admin-token.yaml")
        try Self.writeConfig("""
            listeners: [{address: 127.0.0.1:0}]
            admin: {address: 127.0.0.1:0, token: "${env:GATEWAYD_ADMIN_TOKEN}"}
            routes: [{name: hello, match: {prefix: /hello}, upstream: echo}]
            """, to: config)
        defer { try? FileManager.default.removeItem(at: config) }
        let gateway = try SpawnedGateway(config: config.path, environment: ["GATEWAYD_ADMIN_TOKEN": token])
        defer { gateway.stop() }
        let admin = "http://127.0.0.1:\(try #require(gateway.adminPort))"
        func status(_ arguments: [String]) throws -> String { try curl(["-s", "-o", "/dev/null", "-w", "%{http_code}"] + arguments).text }
        // Health and metrics stay open for probes and scrapers.
        #expect(try status(["\(admin)/healthz"]) == "200" && status(["\(admin)/metrics"]) == "200")
        for (method, path) in [("GET", "/config"), ("GET", "/routes"), ("POST", "/reload")] {
            #expect(try status(["-X", method, "\(admin)\(path)"]) == "401")
            #expect(try status(["-X", method, "-H", "Authorization: Bearer wrong-\(token)", "\(admin)\(path)"]) == "401")
            #expect(try status(["-X", method, "-H", "Authorization: Bearer \(token)", "\(admin)\(path)"]) == "200")
        }
        let refused = try curl(["-s", "-i", "\(admin)/config"]).text
        #expect(refused.contains("WWW-Authenticate: Bearer realm=\"gatewayd admin\"") && refused.contains("urn:gatewayd:problem:unauthorized"))
        let routes = try curl(["-s", "-H", "Authorization: Bearer \(token)", "\(admin)/routes"]).text
        #expect(routes == "routes[0] hello\n  match     any method  /hello…\n  upstream  echo (built-in echo)\n  timeout   60s (default)\n")
        let shown = try curl(["-s", "-H", "Authorization: Bearer \(token)", "\(admin)/config"]).text
        #expect(!shown.contains(token))
    }
}
