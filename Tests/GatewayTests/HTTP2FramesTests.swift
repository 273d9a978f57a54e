import NIOCore
import CNGHTTP2
import Testing
@testable import Gateway

/// HTTP/2 spoken frame by frame through libnghttp2, valid and malformed.
@Suite(.ownThreads) struct HTTP2FramesTests {
    static let yaml = """
        listeners: [{address: 127.0.0.1:0, protocols: [http1, h2c]}]
        routes: [{name: echo, upstream: echo, response_headers: {set: {X-Route: echo}}}]
        """

    @Test func concurrentStreamsOnOneConnection() async throws {
        let gateway = try await GatewayHarness.start(Self.yaml)
        let client = try NGHTTP2Client(port: gateway.port)
        let streams = (1...5).map { client.submit(method: "GET", path: "/s/\($0)?n=\($0)", headers: [("x-call", "\($0)")]) }
        client.run { c in streams.allSatisfy { c.responses[$0]?.closed == true } }
        for (i, stream) in streams.enumerated() {
            let response = try #require(client.responses[stream])
            #expect(response.status == "200")
            #expect(response.headers.contains { $0 == ("x-route", "echo") })
            let body = String(decoding: response.body, as: UTF8.self)
            #expect(body.hasPrefix(#"{"method":"GET","path":"/s/\#(i + 1)","query":"n=\#(i + 1)""#))
            #expect(body.contains(#"["x-call","\#(i + 1)"]"#))
            // The whole answer in one DATA frame that also ends the stream.
            let data = client.rawFrames.filter { $0.type == 0x0 && $0.stream == UInt32(stream) }
            #expect(data.count == 1 && data.first?.flags == 0x1 && data.first?.length == response.body.count)
        }
        #expect(client.goAwayCode == nil)
    }

    @Test func dataOnStreamZeroIsAConnectionError() async throws {
        let gateway = try await GatewayHarness.start(Self.yaml)
        let client = try NGHTTP2Client(port: gateway.port)
        client.sendRaw(NGHTTP2Client.frame(type: 0x0, flags: 0, stream: 0, payload: Array("boom".utf8)))
        client.run { $0.goAwayCode != nil }
        #expect(client.goAwayCode == NGHTTP2_PROTOCOL_ERROR.rawValue)
        // A connection error ends the connection, not just the conversation.
        #expect(client.connectionClosed || client.closedByServer(within: 3))
    }

    /// h2spec http2/5.1.1/2: a HEADERS frame on an id below one already
    /// opened is a connection error, never a request: ids a client skipped
    /// are closed for good.
    @Test(arguments: [[5, 3], [1, 3, 9, 5], [1, 3, 5, 11, 7]])
    func aRequestOnAnIdBelowTheNewestIsAConnectionError(ids: [Int]) async throws {
        let gateway = try await GatewayHarness.start(Self.yaml)
        let client = try NGHTTP2Client(port: gateway.port)
        let request = client.encodeHeaderBlock([(":method", "GET"), (":path", "/"), (":scheme", "http"), (":authority", "a")])
        for id in ids.dropLast() {
            client.sendRaw(NGHTTP2Client.frame(type: 0x1, flags: 0x5, stream: UInt32(id), payload: request))
        }
        client.readRaw(seconds: 5) { c in ids.dropLast().allSatisfy { id in c.rawFrames.contains { $0.type == 0x0 && $0.stream == UInt32(id) } } }
        #expect(client.goAwayCode == nil)
        client.sendRaw(NGHTTP2Client.frame(type: 0x1, flags: 0x5, stream: UInt32(ids.last!), payload: request))
        client.readRaw(seconds: 5) { $0.rawFrames.contains { $0.type == 0x7 } }
        let goAway = try #require(client.rawFrames.first { $0.type == 0x7 })
        #expect(goAway.errorCode == NGHTTP2_PROTOCOL_ERROR.rawValue)
        #expect(client.goAwayLastStreamIDs == [UInt32(ids.dropLast().max()!)])
        #expect(!client.rawFrames.contains { $0.stream == UInt32(ids.last!) })
        #expect(client.connectionClosed || client.closedByServer(within: 3))
    }

    @Test func garbageHeaderBlockIsACompressionError() async throws {
        let gateway = try await GatewayHarness.start(Self.yaml)
        let client = try NGHTTP2Client(port: gateway.port)
        // END_HEADERS | END_STREAM, an HPACK index far past any table.
        client.sendRaw(NGHTTP2Client.frame(type: 0x1, flags: 0x5, stream: 1, payload: [0xFF, 0xFF, 0xFF, 0xFF, 0x0F]))
        client.run { $0.goAwayCode != nil }
        #expect(client.goAwayCode == NGHTTP2_COMPRESSION_ERROR.rawValue)
        #expect(client.connectionClosed || client.closedByServer(within: 3))
    }

    @Test func oversizedFrameIsAFrameSizeError() async throws {
        let gateway = try await GatewayHarness.start(Self.yaml)
        let client = try NGHTTP2Client(port: gateway.port)
        let headers = client.encodeHeaderBlock([(":method", "POST"), (":path", "/"), (":scheme", "http"), (":authority", "a")])
        client.sendRaw(NGHTTP2Client.frame(type: 0x1, flags: 0x4, stream: 1, payload: headers)
            + NGHTTP2Client.frame(type: 0x0, flags: 0, stream: 1, payload: [UInt8](repeating: 0x61, count: 20_000)))
        client.run { $0.goAwayCode != nil }
        #expect(client.goAwayCode == NGHTTP2_FRAME_SIZE_ERROR.rawValue)
        #expect(client.connectionClosed || client.closedByServer(within: 3))
    }

    @Test func requestWithoutPathIsRefusedAndTheConnectionLives() async throws {
        let gateway = try await GatewayHarness.start(Self.yaml)
        let client = try NGHTTP2Client(port: gateway.port)
        let missingPath = client.encodeHeaderBlock([(":method", "GET"), (":scheme", "http"), (":authority", "a")])
        client.sendRaw(NGHTTP2Client.frame(type: 0x1, flags: 0x5, stream: 1, payload: missingPath))
        client.readRaw(seconds: 5) { $0.rawFrames.contains { $0.type == 0x3 && $0.stream == 1 } }
        #expect(client.rawFrames.contains { $0.type == 0x3 && $0.stream == 1 && $0.errorCode == NGHTTP2_PROTOCOL_ERROR.rawValue })
        // A well-formed request on the same connection still gets its answer.
        let valid = client.encodeHeaderBlock([(":method", "GET"), (":path", "/after"), (":scheme", "http"), (":authority", "a")])
        client.sendRaw(NGHTTP2Client.frame(type: 0x1, flags: 0x5, stream: 3, payload: valid))
        client.readRaw(seconds: 5) { $0.rawFrames.contains { $0.type == 0x0 && $0.stream == 3 } }
        #expect(client.rawFrames.contains { $0.type == 0x1 && $0.stream == 3 })
        #expect(client.rawFrames.contains { $0.type == 0x0 && $0.stream == 3 })
        // Two Host fields in place of :authority: refused the same way.
        let twoHosts = client.encodeHeaderBlock([(":method", "GET"), (":path", "/x"), (":scheme", "http"), ("host", "a"), ("host", "b")])
        client.sendRaw(NGHTTP2Client.frame(type: 0x1, flags: 0x5, stream: 5, payload: twoHosts))
        client.readRaw(seconds: 5) { $0.rawFrames.contains { $0.type == 0x3 && $0.stream == 5 } }
        #expect(client.rawFrames.contains { $0.type == 0x3 && $0.stream == 5 && $0.errorCode == NGHTTP2_PROTOCOL_ERROR.rawValue })
        #expect(!client.rawFrames.contains { $0.type == 0x7 })
    }

    /// RFC 9113 §8.1.1, §8.2 and §8.3: a malformed request or trailer block
    /// resets its own stream (PROTOCOL_ERROR), never reaches a route, and
    /// the connection goes on serving.
    @Test func malformedHeaderBlocksResetTheirStreamOnly() async throws {
        let gateway = try await GatewayHarness.start(Self.yaml)
        let client = try NGHTTP2Client(port: gateway.port)
        let base = [(":method", "GET"), (":scheme", "http"), (":authority", "a"), (":path", "/")]
        let malformed: [[(String, String)]] = [
            base + [("X-Upper", "1")],
            base + [("x(a)", "1")],
            base + [("connection", "keep-alive")],
            base + [("transfer-encoding", "chunked")],
            base + [("upgrade", "h2c")],
            base + [("keep-alive", "5")],
            base + [("proxy-connection", "close")],
            base + [("te", "gzip")],
            base + [("x-a", "a\r\nx-b: 1")],
            base + [("x-a", "a\u{0}b")],
            [(":method", "GET"), (":scheme", "http"), ("x-a", "1"), (":path", "/")],
            [(":method", "GET"), (":scheme", "http"), (":authority", "a"), ("host", "a"), (":path", "/")],
            base + [(":path", "/again")],
            base + [(":status", "200")],
            base + [(":protocol", "websocket")],
            [(":method", "GET"), (":scheme", "http"), (":authority", "a"), (":path", "")],
            [(":method", "GET"), (":scheme", "http"), (":authority", "a"), (":path", "/a b")],
            [(":method", "GET"), (":scheme", "http"), (":authority", "a b"), (":path", "/")],
            [(":method", "CONNECT"), (":authority", "a:443")],
            base + [("", "x")],
        ]
        var stream: UInt32 = 1
        for block in malformed {
            client.sendRaw(NGHTTP2Client.frame(type: 0x1, flags: 0x5, stream: stream, payload: client.encodeHeaderBlock(block)))
            client.readRaw(seconds: 5) { [stream] in $0.rawFrames.contains { $0.type == 0x3 && $0.stream == stream } }
            #expect(client.rawFrames.contains { $0.type == 0x3 && $0.stream == stream && $0.errorCode == NGHTTP2_PROTOCOL_ERROR.rawValue },
                    "\(block)")
            #expect(!client.rawFrames.contains { $0.type == 0x1 && $0.stream == stream }, "\(block)")
            stream += 2
        }
        // Trailers carry no pseudo-header fields.
        let post = client.encodeHeaderBlock([(":method", "POST"), (":scheme", "http"), (":authority", "a"), (":path", "/")])
        client.sendRaw(NGHTTP2Client.frame(type: 0x1, flags: 0x4, stream: stream, payload: post)
            + NGHTTP2Client.frame(type: 0x0, flags: 0, stream: stream, payload: Array("x".utf8))
            + NGHTTP2Client.frame(type: 0x1, flags: 0x5, stream: stream, payload: client.encodeHeaderBlock([(":path", "/t")])))
        client.readRaw(seconds: 5) { [stream] in $0.rawFrames.contains { $0.type == 0x3 && $0.stream == stream } }
        #expect(client.rawFrames.contains { $0.type == 0x3 && $0.stream == stream && $0.errorCode == NGHTTP2_PROTOCOL_ERROR.rawValue })
        #expect(!client.rawFrames.contains { $0.type == 0x1 && $0.stream == stream })
        // What is allowed: TE: trailers, and values with any other byte.
        stream += 2
        let valid = client.encodeHeaderBlock(base + [("te", "trailers"), ("x-a", "ä\tb")])
        client.sendRaw(NGHTTP2Client.frame(type: 0x1, flags: 0x5, stream: stream, payload: valid))
        client.readRaw(seconds: 5) { [stream] in $0.rawFrames.contains { $0.type == 0x0 && $0.stream == stream } }
        #expect(client.rawFrames.contains { $0.type == 0x1 && $0.stream == stream })
        #expect(!client.rawFrames.contains { $0.type == 0x3 && $0.stream == stream })
        // A body ended by well-formed trailers is answered too.
        stream += 2
        client.sendRaw(NGHTTP2Client.frame(type: 0x1, flags: 0x4, stream: stream, payload: post)
            + NGHTTP2Client.frame(type: 0x0, flags: 0, stream: stream, payload: Array("x".utf8))
            + NGHTTP2Client.frame(type: 0x1, flags: 0x5, stream: stream, payload: client.encodeHeaderBlock([("x-checksum", "abc")])))
        client.readRaw(seconds: 5) { [stream] in $0.rawFrames.contains { $0.type == 0x0 && $0.stream == stream } }
        #expect(client.rawFrames.contains { $0.type == 0x1 && $0.stream == stream })
        #expect(!client.rawFrames.contains { $0.type == 0x3 && $0.stream == stream })
        #expect(!client.rawFrames.contains { $0.type == 0x7 })
    }

    /// A stream the client resets mid-call: its upstream connection (in an
    /// unknown state) is dropped, and the connection's other streams go on.
    @Test func streamResetByTheClientAbandonsItsCallOnly() async throws {
        let upstream = RecordingUpstream { request in
            .respond(status: 200, headers: [], body: Array(request.uri.utf8), delay: request.uri == "/slow" ? .seconds(1) : .zero)
        }
        let upstreamPort = try await upstream.start()
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0, protocols: [h2c]}]
            upstreams: {up: {url: "http://127.0.0.1:\(upstreamPort)"}}
            routes: [{name: pass, upstream: up}]
            """)
        let client = try NGHTTP2Client(port: gateway.port)
        let slow = client.submit(method: "GET", path: "/slow")
        client.run(seconds: 2) { _ in upstream.requests.count == 1 }
        client.sendRaw(NGHTTP2Client.frame(type: 0x3, flags: 0, stream: UInt32(slow), payload: [0, 0, 0, 0x8]))
        let next = client.submit(method: "GET", path: "/next")
        client.run { $0.responses[next]?.closed == true }
        #expect(client.responses[next]?.status == "200")
        #expect(String(decoding: client.responses[next]?.body ?? [], as: UTF8.self) == "/next")
        #expect(client.responses[slow]?.status == nil)
        #expect(upstream.requests.map(\.uri) == ["/slow", "/next"])
        // The reset call's connection was closed, not reused for /next.
        #expect(upstream.connections == 2)
        #expect(client.goAwayCode == nil)
    }

    @Test func idleConnectionsGetGoAwayAndClose() async throws {
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0, protocols: [h2c]}]
            limits: {idle_timeout: 300ms}
            routes: [{name: echo, upstream: echo}]
            """)
        let client = try NGHTTP2Client(port: gateway.port)
        let stream = client.submit(method: "GET", path: "/once")
        client.run { $0.responses[stream]?.closed == true }
        #expect(client.responses[stream]?.status == "200")
        let start = ContinuousClock.now
        client.run(seconds: 3) { $0.goAwayCode != nil }
        #expect(client.goAwayCode == NGHTTP2_NO_ERROR.rawValue)
        #expect(ContinuousClock.now - start >= .milliseconds(250))
        #expect(client.sessionFinished)
    }

    /// SETTINGS_MAX_CONCURRENT_STREAMS is 256: a client that opens more
    /// before it acknowledged the setting gets REFUSED_STREAM for each one
    /// past it (safe to retry: RFC 9113 §8.7), and the connection serves on.
    @Test func streamsPastTheConcurrencyLimitAreRefused() async throws {
        let gateway = try await GatewayHarness.start(Self.yaml)
        let client = try NGHTTP2Client(port: gateway.port)
        let open = client.encodeHeaderBlock([(":method", "POST"), (":path", "/wait"), (":scheme", "http"), (":authority", "a")])
        // 300 requests whose bodies never come: each holds its stream open.
        client.sendRaw((0..<300).flatMap { NGHTTP2Client.frame(type: 0x1, flags: 0x4, stream: UInt32(2 * $0 + 1), payload: open) })
        client.readRaw(seconds: 5) { $0.rawFrames.filter { $0.type == 0x3 }.count >= 44 }
        let refused = client.rawFrames.filter { $0.type == 0x3 && $0.errorCode == NGHTTP2_REFUSED_STREAM.rawValue }.map(\.stream)
        #expect(refused == Array(stride(from: UInt32(513), through: 599, by: 2)))
        #expect(!client.rawFrames.contains { $0.type == 0x7 })
    }

    /// A header block past limits.max_header_bytes is answered 431 on its
    /// own stream; the connection serves on.
    @Test func aHeaderBlockPastTheLimitGets431() async throws {
        let gateway = try await GatewayHarness.start(Self.yaml + "\nlimits: {max_header_bytes: 4096}")
        let client = try NGHTTP2Client(port: gateway.port)
        let big = client.submit(method: "GET", path: "/big", headers: [("x-big", String(repeating: "b", count: 5000))])
        client.run { $0.responses[big]?.closed == true }
        #expect(client.responses[big]?.status == "431")
        let problem = String(decoding: client.responses[big]?.body ?? [], as: UTF8.self)
        #expect(problem.contains("urn:gatewayd:problem:headers-too-large"))
        let small = client.submit(method: "GET", path: "/small")
        client.run { $0.responses[small]?.closed == true }
        #expect(client.responses[small]?.status == "200")
        #expect(client.goAwayCode == nil)
    }

    /// Drain: GOAWAY(NO_ERROR) naming the last stream taken, the stream in
    /// flight answered whole, then the connection closes.
    @Test func drainLetsTheStreamsInFlightFinish() async throws {
        let upstream = RecordingUpstream { _ in .respond(status: 200, headers: [], body: Array("done".utf8), delay: .milliseconds(1500)) }
        let upstreamPort = try await upstream.start()
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0, protocols: [h2c]}]
            upstreams: {up: {url: "http://127.0.0.1:\(upstreamPort)"}}
            routes: [{name: pass, upstream: up}]
            """)
        let client = try NGHTTP2Client(port: gateway.port)
        let slow = client.submit(method: "GET", path: "/slow")
        client.run(seconds: 2) { _ in upstream.requests.count == 1 }
        let drained = Task { await gateway.server.drain(timeout: .seconds(10)) }
        // Suspended, not blocked: the drain starts on the test's threads.
        #expect(await eventually(timeout: 5) { !gateway.server.status.isReady })
        client.run(seconds: 5) { $0.responses[slow]?.closed == true && $0.goAwayLastStreamIDs.contains(UInt32(slow)) }
        #expect(client.responses[slow]?.status == "200")
        #expect(String(decoding: client.responses[slow]?.body ?? [], as: UTF8.self) == "done")
        #expect(client.goAwayCode == NGHTTP2_NO_ERROR.rawValue)
        #expect(client.goAwayLastStreamIDs.last == UInt32(slow))
        #expect(client.closedByServer(within: 3))
        #expect(await drained.value)
    }
}

@Suite struct ClientStreamIDsTests {
    @Test func skippedIdsAreClosedAndOthersAreNot() {
        var ids = ClientStreamIDs()
        let accepted = [1, 3, 9, 3, 9, 5, 7, 4].map { ids.headers(on: Int32($0)) }
        // Trailers on a stream already seen are libnghttp2's to judge; even
        // ids are the server's, which libnghttp2 refuses itself.
        #expect(accepted == [true, true, true, true, true, false, false, true])
        var fresh = ClientStreamIDs()
        let first = [5, 1, 3].map { fresh.headers(on: Int32($0)) }
        #expect(first == [true, false, false])
    }
}

/// The stream state both legs share, without a session.
@Suite struct HTTP2StreamStateTests {
    @Test func aPausedReaderKeepsItsWindowShutAndTheQueueDefersUntilResumed() {
        var stream = HTTP2StreamState()
        #expect(stream.received(100) == 100)
        #expect(stream.setReading(false) == 0 && stream.received(40) == 0 && stream.received(2) == 0)
        // Resumed: what came meanwhile is consumed now, once.
        #expect(stream.setReading(true) == 42 && stream.setReading(true) == 0)
        var buffer = [UInt8](repeating: 0, count: 4)
        let first = buffer.withUnsafeMutableBytes { stream.read(into: $0) }
        #expect(first == .deferred && stream.resumeNeeded() && !stream.resumeNeeded())
        stream.send(ByteBuffer(string: "abcdef"))
        #expect(!stream.fits(window: 6) && stream.fits(window: 7))
        let parts = (0..<2).map { _ in buffer.withUnsafeMutableBytes { stream.read(into: $0) } }
        #expect(parts == [.bytes(4, end: false), .bytes(2, end: false)])
        stream.endSending()
        let last = buffer.withUnsafeMutableBytes { stream.read(into: $0) }
        #expect(last == .bytes(0, end: true))
        // Closed while paused: the bytes never consumed go back to the connection.
        _ = stream.setReading(false)
        _ = stream.received(7)
        #expect(stream.closed() == 7 && !stream.open && !stream.resumeNeeded())
    }
}
