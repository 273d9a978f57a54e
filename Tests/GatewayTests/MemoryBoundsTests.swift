import Foundation
import Testing
@testable import Gateway

/// What a spawned daemon keeps after work that must leave nothing behind:
/// tunnels opened and closed, reloads of a ticking filter. Resident memory
/// is read from /proc after a warm-up; the bounds are per item, with room
/// for the allocator's pages (the bulk figures are scripts/bench's).
@Suite(.serialized, .ownThreads) struct MemoryBoundsTests {
    /// An upstream that switches every request to raw bytes (101) and
    /// echoes them until the client goes: what a WebSocket server does to a tunnel.
    static let switching = """
        import socket, sys, threading
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0)); s.listen(512)
        print(s.getsockname()[1], flush=True)
        def serve(c):
            buf = b""
            while b"\\r\\n\\r\\n" not in buf:
                data = c.recv(4096)
                if not data: c.close(); return
                buf += data
            c.sendall(b"HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\n\\r\\n")
            while True:
                data = c.recv(4096)
                if not data: break
                c.sendall(data)
            c.close()
        while True:
            c, _ = s.accept()
            threading.Thread(target=serve, args=(c,), daemon=True).start()
        """

    /// Opens and closes `count` tunnels through the gateway, one byte echoed in each.
    static func tunnels(port: Int, count: Int) -> String {
        """
        import socket
        ok = 0
        for i in range(\(count)):
            c = socket.create_connection(("127.0.0.1", \(port)), timeout=10)
            c.sendall(b"GET /live HTTP/1.1\\r\\nHost: a\\r\\nConnection: Upgrade\\r\\nUpgrade: websocket\\r\\n\\r\\n")
            buf = b""
            while b"\\r\\n\\r\\n" not in buf: buf += c.recv(4096)
            c.sendall(b"x")
            rest = buf.split(b"\\r\\n\\r\\n", 1)[1]
            while not rest: rest = c.recv(16)
            ok += rest == b"x"
            c.close()
        print(ok)
        """
    }

    @Test func closedTunnelsLeaveNothingBehind() throws {
        let upstream = try BackgroundPeer("/usr/bin/env", ["python3", "-c", Self.switching])
        defer { upstream.process.signal(SIGKILL); upstream.process.wait() }
        #expect(upstream.waitFor("\n", seconds: 10))
        let port = try #require(Int(upstream.output.trimmingCharacters(in: .whitespacesAndNewlines)))
        let gateway = try SpawnedGateway(yaml: """
            listeners: [{address: 127.0.0.1:0}]
            logging: {access_log: false}
            upstreams: {ws: {url: "http://127.0.0.1:\(port)"}}
            routes: [{name: live, upstream: ws, upgrade: [websocket]}]
            """)
        defer { gateway.stop() }
        #expect(try runPeer("/usr/bin/env", ["python3", "-c", Self.tunnels(port: gateway.port, count: 1000)]).text == "1000\n")
        let before = try gateway.residentBytes()
        let count = 10_000
        #expect(try runPeer("/usr/bin/env", ["python3", "-c", Self.tunnels(port: gateway.port, count: count)]).text == "\(count)\n")
        // The leaks this guards against: 6.7 KB a tunnel (a cycle), ~500 B (its idle timer, kept a minute after it closed).
        let growth = try gateway.residentBytes() - before
        #expect(growth <= 64 * count, "RSS grew \(growth) bytes over \(count) tunnels")
    }

    /// Once serving, the daemon keeps few of its binary's read-only pages
    /// (code, constants, symbols): the start-up's are let go, and after a
    /// reload again; calls still run on what maps back. Without the release,
    /// most of the code the start-up ran stays mapped with its neighbours.
    @Test func theStartUpsPagesAreLetGo() throws {
        let gateway = try SpawnedGateway(yaml: """
            listeners: [{address: 127.0.0.1:0}]
            logging: {access_log: false}
            routes: [{name: r, upstream: echo}]
            """)
        defer { gateway.stop() }
        func resident() throws -> (rss: Int, size: Int) {
            let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(gateway.process.pid)/exe")
            var total = (rss: 0, size: 0), inside = false
            for line in try String(contentsOfFile: "/proc/\(gateway.process.pid)/smaps", encoding: .utf8).split(separator: "\n") {
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                let range = fields.first?.split(separator: "-") ?? []
                if range.count == 2, range.allSatisfy({ $0.allSatisfy(\.isHexDigit) }) {
                    inside = fields.count >= 6 && (fields[1] == "r-xp" || fields[1] == "r--p") && fields[5...].joined(separator: " ") == executable
                } else if inside, fields.count >= 2, let kib = Int(fields[1]) {
                    if fields[0] == "Rss:" { total.rss += kib << 10 }
                    if fields[0] == "Size:" { total.size += kib << 10 }
                }
            }
            return total
        }
        // Let go just after the "listening on" line (that line's code is the start-up's too).
        var started = try resident()
        _ = eventuallyBlocking(timeout: 10) { started = (try? resident()) ?? started; return started.rss * 4 < started.size }
        #expect(started.size > 0)
        #expect(started.rss * 4 < started.size, "\(started.rss) of \(started.size) bytes resident after start")
        #expect(try curl(["-s", "http://127.0.0.1:\(gateway.port)/x"]).text.contains("\"path\""))
        gateway.signal(SIGHUP)
        #expect(eventuallyBlocking(timeout: 20) { gateway.log.contains("config reloaded") })
        var reloaded = try resident()
        _ = eventuallyBlocking(timeout: 10) { reloaded = (try? resident()) ?? reloaded; return reloaded.rss * 4 < reloaded.size }
        #expect(reloaded.rss * 4 < reloaded.size, "\(reloaded.rss) of \(reloaded.size) bytes resident after a reload")
        #expect(try curl(["-s", "http://127.0.0.1:\(gateway.port)/y"]).text.contains("\"path\""))
    }

    /// A filter that ticks every 10 ms, reloaded 20 times: each reload's VMs
    /// are released. Its 16 MiB of memory is written once, so each VM kept
    /// would show in RSS (the leak this guards against kept them all).
    @Test func reloadsOfATickingFilterLeaveNothingBehind() throws {
        let ticking = WasmFilter.wat(
            imports: #"(import "env" "proxy_set_tick_period_milliseconds" (func $tick (param i32) (result i32)))"#,
            configure: "(memory.fill (i32.const 0) (i32.const 1) (i32.const 16777216)) (drop (call $tick (i32.const 10))) (i32.const 1)",
            """
            (func (export "proxy_on_tick") (param i32))
            (func (export "proxy_on_request_headers") (param i32 i32 i32) (result i32) (i32.const 0))
            """).replacingOccurrences(of: #"(memory (export "memory") 2)"#, with: #"(memory (export "memory") 256)"#)
        let wasm = try WasmFilter.file(ticking)
        let config = FileManager.default.temporaryDirectory.appendingPathComponent("ticking-\(getpid()).yaml")
        func write(_ generation: Int) throws {
            try """
                listeners: [{address: 127.0.0.1:0}]
                logging: {access_log: false}
                filters: {tick: {wasm: \(wasm), max_memory: 16777216}}
                routes: [{name: r, upstream: echo, filters: [tick], response_headers: {set: {X-Generation: "\(generation)"}}}]
                """.write(to: config, atomically: true, encoding: .utf8)
        }
        try write(0)
        defer { try? FileManager.default.removeItem(at: config) }
        let gateway = try SpawnedGateway(config: config.path)
        defer { gateway.stop() }
        func reload(_ generation: Int) throws {
            try write(generation)
            let reloads = gateway.log.components(separatedBy: "config reloaded").count
            gateway.signal(SIGHUP)
            #expect(eventuallyBlocking(timeout: 20) { gateway.log.components(separatedBy: "config reloaded").count > reloads })
            // A call on the new config builds its VM (each loop's, on first use).
            #expect(try curl(["-D", "-", "-o", "/dev/null", "http://127.0.0.1:\(gateway.port)/x"]).text.contains("X-Generation: \(generation)"))
        }
        for generation in 1...3 { try reload(generation) }
        let before = try gateway.residentBytes()
        for generation in 4...23 { try reload(generation) }
        let growth = try gateway.residentBytes() - before
        #expect(growth < 2 << 20, "RSS grew \(growth) bytes over 20 reloads")
    }
}
