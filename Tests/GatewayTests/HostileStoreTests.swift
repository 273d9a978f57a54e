import Foundation
import NIOConcurrencyHelpers
import Testing
@testable import Gateway

/// What a hostile or broken store sends, against the daemon as operators
/// run it (a spawned gatewayd): every value from the store is untrusted.
///
/// | the store sends                                        | the daemon                                               |
/// |--------------------------------------------------------|----------------------------------------------------------|
/// | a fleet credential with CR/LF (a smuggled request)     | refused and logged; refreshed here; never on the wire    |
/// | a fleet credential past 8 KiB                          | refused the same way                                     |
/// | a lease of Int64.max tokens, a wait of Int64.max ms    | bounded by what was asked; the daemon lives              |
/// | negative counts for the retry budget                   | read as 0                                                |
@Suite(.serialized, .ownThreads) struct HostileStoreTests {
    @Test(arguments: ["Bearer x\r\nX-Injected: yes\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n", "Bearer " + String(repeating: "x", count: 9000)])
    func aPlantedFleetCredentialIsRefusedAndNeverSent(planted: String) async throws {
        try await Teardown.scope {
            let redis = try RedisServer()
            let issued = NIOLockedValueBox(0)
            let auth = RecordingUpstream { _ in
                let n = issued.withLockedValue { $0 += 1; return $0 }
                return .respond(status: 200, headers: [], body: Array(#"{"access_token":"tok-\#(n)"}"#.utf8))
            }
            let app = RecordingUpstream { request in
                request.header("Authorization") == ["Bearer tok-1"]
                    ? .respond(status: 200, headers: [], body: Array("secret data".utf8)) : .respond(status: 401, headers: [], body: [])
            }
            let (authPort, appPort) = (try await auth.start(), try await app.start())
            _ = try redis.cli(["SET", "gatewayd:cred:protected:auth/token:Authorization", planted])
            let gateway = try SpawnedGateway(yaml: """
                listeners: [{address: 127.0.0.1:0}]
                store: {redis: {url: "\(redis.url)", timeout: 500ms}}
                upstreams:
                  app: {url: "http://127.0.0.1:\(appPort)"}
                  auth: {url: "http://127.0.0.1:\(authPort)"}
                routes:
                  - name: protected
                    upstream: app
                    retry: {attempts: 2}
                    validate:
                      - status: 401
                        then: {refresh: {request: {upstream: auth, method: POST, path: /token},
                                         capture: {pointer: /access_token, header: Authorization, format: "Bearer {}"}, share: fleet}}
                """)
            defer { gateway.stop() }
            for _ in 0..<2 {
                #expect(try await curlDetached(["-w", " %{http_code}", "http://127.0.0.1:\(gateway.port)/data"]).text == "secret data 200")
            }
            #expect(app.requests.allSatisfy { $0.header("X-Injected").isEmpty && $0.uri == "/data" }, "\(app.requests.map(\.uri))")
            #expect(app.requests.allSatisfy { ($0.header("Authorization").first?.count ?? 0) < 100 })
            #expect(auth.requests.count == 1)
            #expect(gateway.log.contains("is not a valid header value; refreshing here instead"))
        }
    }

    /// A store that answers every script with the largest integers RESP
    /// carries: the lease takes what it asked for at most, the budget's
    /// sums do not overflow, and the daemon serves on.
    @Test func hugeIntegersFromTheStoreAreBoundedAndTheDaemonLives() async throws {
        let store = try FakeRedis(reply: "*2\r\n:9223372036854775807\r\n:9223372036854775807\r\n")
        defer { store.stop() }
        let gateway = try SpawnedGateway(yaml: """
            listeners: [{address: 127.0.0.1:0}]
            store: {redis: {url: "redis://127.0.0.1:\(store.port)", timeout: 500ms}}
            routes:
              - name: fleet
                upstream: echo
                retry: {attempts: 2, budget: {scope: fleet}}
                rate_limit: {requests: 5, per: 1s, scope: fleet, lease: 4}
            """)
        defer { gateway.stop() }
        var codes: [String] = []
        for i in 0..<20 {
            codes.append(try await curlDetached(["-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(gateway.port)/c/\(i)"]).text)
        }
        #expect(codes.allSatisfy { $0 == "200" || $0 == "429" }, "\(codes)")
        #expect(codes.first == "200")
        #expect(gateway.process.isRunning)
        #expect(gateway.log.contains("store: connected to redis at 127.0.0.1:\(store.port)"), "the store was never asked")
    }

    @Test func storeCountsSaturate() {
        #expect(RedisValue.integer(.max).count == Int(RedisValue.maxCount))
        #expect(RedisValue.integer(.min).count == 0)
        #expect(RedisValue.integer(-5).count == 0)
        #expect(RedisValue.string(Array("12".utf8)).count == 12)
        var lease = FleetLease(now: 0)
        guard case .allowed(let refill?) = lease.take(now: 0, size: 4, rate: 1, nextID: 1) else { Issue.record("no refill asked"); return }
        lease.granted(refill, got: .max, wait: .infinity, now: 0)
        #expect(lease.tokens == 4)
        #expect(lease.take(now: 0, size: 4, rate: 1, nextID: 2) == .allowed(refill: nil) && lease.tokens == 3)
    }
}

/// A RESP server that answers `+OK` to the handshake and `reply` to every
/// script (EVAL, EVALSHA): a store that says what it likes.
final class FakeRedis: @unchecked Sendable {
    let port: Int
    private let process: ChildProcess

    init(reply: String) throws {
        port = freeLoopbackPort()
        let script = """
            import socket, threading
            reply = \(String(reflecting: reply)).encode()
            def serve(c):
                buf = b""
                while True:
                    data = c.recv(65536)
                    if not data: return
                    buf += data
                    while True:
                        # One RESP array of bulk strings: *N, then $len and the bytes for each.
                        if not buf.startswith(b"*") or b"\\r\\n" not in buf: break
                        head, rest = buf.split(b"\\r\\n", 1)
                        n, args, ok = int(head[1:]), [], True
                        for _ in range(n):
                            if b"\\r\\n" not in rest: ok = False; break
                            l, rest2 = rest.split(b"\\r\\n", 1)
                            size = int(l[1:])
                            if len(rest2) < size + 2: ok = False; break
                            args.append(rest2[:size]); rest = rest2[size + 2:]
                        if not ok: break
                        buf = rest
                        cmd = args[0].upper()
                        if cmd in (b"EVAL", b"EVALSHA"): c.sendall(reply)
                        elif cmd == b"SCRIPT": c.sendall(b"$40\\r\\n" + b"0" * 40 + b"\\r\\n")
                        elif cmd == b"PING": c.sendall(b"+PONG\\r\\n")
                        else: c.sendall(b"+OK\\r\\n")
            s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", \(port))); s.listen(16)
            while True:
                c, _ = s.accept()
                threading.Thread(target=serve, args=(c,), daemon=True).start()
            """
        process = try ChildProcess("/usr/bin/env", ["python3", "-c", script], output: .null, error: .null)
        let port = port
        _ = eventuallyBlocking(timeout: 10) { loopbackConnection(port: port).map { close($0); return true } ?? false }
    }

    func stop() {
        process.signal(SIGKILL)
        _ = process.wait()
    }
}
