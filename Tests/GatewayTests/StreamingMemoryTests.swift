import Foundation
import Testing

/// Large bodies through the built binary must not grow its memory with their
/// size: pass-through routes stream both ways, with backpressure.
@Suite(.ownThreads) struct StreamingMemoryTests {
    /// Runs `body` against the gatewayd binary routing everything to `upstream`,
    /// and returns how far the daemon's peak RSS rose above its RSS before.
    func peakGrowth(through upstream: RecordingUpstream, _ body: (SpawnedGateway) throws -> Void) async throws -> Int {
        let upstreamPort = try await upstream.start()
        let gateway = try SpawnedGateway(yaml: """
            listeners: [{address: 127.0.0.1:0}]
            upstreams: {other: {url: "http://127.0.0.1:\(upstreamPort)"}}
            routes: [{name: pass, upstream: other, timeout: 600s}]
            """)
        defer { gateway.stop() }
        let before = try gateway.residentBytes()
        try body(gateway)
        return try gateway.peakResidentBytes() - before
    }

    /// Over HTTP/2 the client is held back by the stream's flow-control
    /// window, which the gateway reopens only as the upstream takes the data.
    @Test(arguments: [false, true]) func largeUploadKeepsMemoryBounded(http2: Bool) async throws {
        let size = 256 << 20
        let sink = RecordingUpstream(keepBodies: false) { request in
            .respond(status: 200, headers: [], body: Array("\(request.bodyCount)".utf8))
        }
        let growth = try await peakGrowth(through: sink) { gateway in
            let upload = try runPeer("/bin/sh", ["-c", "head -c \(size) /dev/zero | curl -s --max-time 600 -T - "
                + (http2 ? "--http2-prior-knowledge " : "") + "-H 'Content-Type: application/octet-stream' http://127.0.0.1:\(gateway.port)/upload"])
            #expect(upload.text == "\(size)")
        }
        #expect(growth < 16 << 20, "peak RSS grew \(growth >> 20) MiB during a \(size >> 20) MiB upload")
    }

    /// A client that reads slowly: the gateway stops reading the upstream
    /// instead of buffering the response.
    @Test(arguments: [false, true]) func largeDownloadToASlowClientKeepsMemoryBounded(http2: Bool) async throws {
        let size = 96 << 20
        let body = [UInt8](repeating: 0x61, count: size)
        let source = RecordingUpstream { _ in .respond(status: 200, headers: [], body: body) }
        let growth = try await peakGrowth(through: source) { gateway in
            let download = try runPeer("/usr/bin/curl", (http2 ? ["--http2-prior-knowledge"] : []) + [
                "-s", "--max-time", "60", "--limit-rate", "32M", "-o", "/dev/null", "-w", "%{size_download}",
                "http://127.0.0.1:\(gateway.port)/big",
            ])
            #expect(download.text == "\(size)")
        }
        #expect(growth < 24 << 20, "peak RSS grew \(growth >> 20) MiB during a \(size >> 20) MiB download")
    }

    /// A client that announces an initial window of 0 and never opens it:
    /// the gateway may send nothing, so it reads next to nothing of the
    /// answer from the upstream instead of buffering it.
    @Test func http2ClientWithAShutWindowKeepsMemoryBounded() async throws {
        let body = [UInt8](repeating: 0x61, count: 96 << 20)
        let source = RecordingUpstream { _ in .respond(status: 200, headers: [], body: body) }
        let growth = try await peakGrowth(through: source) { gateway in
            let client = try NGHTTP2Client(port: gateway.port, initialWindowSize: 0)
            let stream = client.submit(method: "GET", path: "/big")
            client.run(seconds: 10) { $0.responses[stream]?.status != nil }
            // Then the window stays shut until the gateway's memory has held still for a second (deadline 10 s):
            // what it read of the answer meanwhile is the growth measured.
            var samples: [(at: ContinuousClock.Instant, bytes: Int)] = []
            let settled = try eventuallyBlocking(timeout: 10) {
                let now = ContinuousClock.now, bytes = try gateway.residentBytes()
                samples.append((now, bytes))
                guard let aSecondAgo = samples.last(where: { now - $0.at >= .seconds(1) }) else { return false }
                return abs(bytes - aSecondAgo.bytes) < 1 << 20
            }
            #expect(settled, "the gateway's memory kept moving while the client's window was shut")
            #expect(client.responses[stream]?.status == "200")
            #expect(client.responses[stream]?.body.isEmpty == true)
        }
        #expect(growth < 24 << 20, "peak RSS grew \(growth >> 20) MiB while a client kept its window shut on a 96 MiB answer")
    }
}

/// Finished HTTP/2 streams and connections must leave nothing behind (a
/// handler that kept its context alive once leaked ~800 bytes per stream).
@Suite(.ownThreads) struct StreamLeakTests {
    @Test func manyHTTP2StreamsDoNotGrowMemory() async throws {
        let upstream = RecordingUpstream(keepBodies: false)
        let port = try await upstream.start()
        let gateway = try SpawnedGateway(yaml: """
            listeners: [{address: 127.0.0.1:0}]
            logging: {access_log: false}
            upstreams: {app: {url: "http://127.0.0.1:\(port)"}}
            routes: [{name: app, upstream: app}]
            """)
        defer { gateway.stop() }
        func load(_ requests: Int) async throws {
            let out = try await runPeerDetached("/usr/bin/h2load", ["-n", "\(requests)", "-c", "8", "-m", "8", "http://127.0.0.1:\(gateway.port)/x"]).text
            #expect(out.contains("\(requests) succeeded, 0 failed"), "\(out)")
        }
        try await load(4000)  // warm up: pools, allocator arenas
        let before = try gateway.residentBytes()
        try await load(20000)
        let growth = try gateway.residentBytes() - before
        #expect(growth < 6 << 20, "RSS grew \(growth >> 10) KiB over 20,000 streams")
    }
}
