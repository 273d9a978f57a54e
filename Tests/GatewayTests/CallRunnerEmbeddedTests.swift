import NIOCore
import NIOEmbedded
import Testing
@testable import Gateway

/// The call runner between two EmbeddedChannels, as async-http-client tests
/// its handler: a client connection and the upstream connections the pool
/// opens, bytes read back on both sides, time passed by hand. No socket, no
/// clock: an ordering here is the same on every run and on a loaded machine.
@Suite struct CallRunnerEmbeddedTests {
    static let yaml = """
        listeners: [{address: 127.0.0.1:0}]
        limits: {idle_timeout: 60s}
        upstreams:
          legacy: {url: "http://192.0.2.1:9000"}
          auth: {url: "http://192.0.2.1:9001"}
        routes:
          - name: retried
            match: {prefix: /r/}
            upstream: legacy
            timeout: 10s
            retry: {attempts: 3, per_try_timeout: 1s, on: [connect-failure, reset, timeout, 503], backoff: {strategy: immediate}}
          - name: held
            match: {prefix: /h/}
            upstream: legacy
            validate: [{json: {pointer: /error, absent: true}, else: fail}]
          - name: token
            match: {prefix: /t/}
            upstream: legacy
            retry: {attempts: 2}
            validate:
              - status: 401
                then:
                  refresh:
                    request: {upstream: auth, method: POST, path: /token}
                    capture: {pointer: /access_token, header: Authorization, format: "Bearer {}"}
          - {name: socket, match: {prefix: /ws}, upstream: legacy, upgrade: [websocket]}
          - {name: plain, match: {prefix: /p/}, upstream: legacy, timeout: 3s}
          - {name: once, match: {prefix: /once/}, upstream: legacy, retry: {attempts: 1, per_try_timeout: 1s}}
          - {name: twice, match: {prefix: /twice/}, upstream: legacy, retry: {attempts: 2, per_try_timeout: 1s}}
        """

    static func ok(_ body: String, status: String = "200 OK", _ fields: String = "") -> String {
        "HTTP/1.1 \(status)\r\nContent-Length: \(body.utf8.count)\r\n\(fields)\r\n\(body)"
    }

    @Test func aCallGoesUpstreamAndItsConnectionIsKeptForTheNext() throws {
        let gateway = try EmbeddedGateway(Self.yaml)
        try gateway.get("/p/a?x=1")
        let sent = try gateway.request(0)
        #expect(sent.hasPrefix("GET /p/a?x=1 HTTP/1.1\r\n") && sent.contains("Host: 192.0.2.1:9000\r\n"), "\(sent)")
        try gateway.respond(0, Self.ok("one"))
        #expect(try gateway.answer().hasSuffix("\r\n\r\none"))
        try gateway.get("/p/b")
        #expect(try gateway.request(0).hasPrefix("GET /p/b HTTP/1.1\r\n"))
        try gateway.respond(0, Self.ok("two"))
        #expect(try gateway.answer().hasSuffix("\r\n\r\ntwo"))
        #expect(gateway.upstreams.count == 1)
    }

    @Test func aResetTryIsSentAgainOnANewConnection() throws {
        let gateway = try EmbeddedGateway(Self.yaml)
        try gateway.get("/r/x")
        let first = try gateway.request(0)
        gateway.reset(0)
        #expect(gateway.upstreams.count == 2)
        #expect(try gateway.request(1) == first)
        try gateway.respond(1, Self.ok("fine"))
        let answer = try gateway.answer()
        #expect(answer.hasPrefix("HTTP/1.1 200 OK\r\n") && answer.hasSuffix("fine"), "\(answer)")
    }

    @Test func a503IsRetriedAndOnlyTheLastAnswerReachesTheClient() throws {
        let gateway = try EmbeddedGateway(Self.yaml)
        try gateway.get("/r/x")
        #expect(try gateway.request(0).hasPrefix("GET /r/x "))
        try gateway.respond(0, Self.ok("busy", status: "503 Service Unavailable"))
        #expect(try gateway.answer().isEmpty)
        // The 503 was read whole: its connection carries the retry.
        #expect(gateway.upstreams.count == 1)
        #expect(try gateway.request(0).hasPrefix("GET /r/x "))
        try gateway.respond(0, Self.ok("fine"))
        let answer = try gateway.answer()
        #expect(answer.hasPrefix("HTTP/1.1 200 OK\r\n") && answer.hasSuffix("fine") && !answer.contains("busy"), "\(answer)")
    }

    @Test func aTryPastItsPerTryTimeoutIsDroppedAndSentAgain() throws {
        let gateway = try EmbeddedGateway(Self.yaml)
        try gateway.get("/r/slow")
        _ = try gateway.request(0)
        gateway.advance(.milliseconds(999))
        #expect(gateway.upstreams.count == 1 && gateway.upstreams[0].isActive)
        gateway.advance(.milliseconds(2))
        // The late try's connection is closed (its answer could come any time), the next try has its own.
        #expect(!gateway.upstreams[0].isActive && gateway.upstreams.count == 2)
        #expect(try gateway.request(1).hasPrefix("GET /r/slow "))
        try gateway.respond(1, Self.ok("late but fine"))
        #expect(try gateway.answer().hasSuffix("late but fine"))
    }

    @Test func theCallsDeadlineEndsItWith504() throws {
        let gateway = try EmbeddedGateway(Self.yaml)
        try gateway.get("/p/never")
        _ = try gateway.request(0)
        gateway.advance(.milliseconds(2999))
        #expect(try gateway.answer().isEmpty)
        gateway.advance(.milliseconds(2))
        let answer = try gateway.answer()
        #expect(answer.hasPrefix("HTTP/1.1 504 Gateway Timeout\r\n") && answer.contains("problem:deadline"), "\(answer)")
        #expect(!gateway.upstreams[0].isActive)
    }

    @Test func aRefusedConnectIsRetried() throws {
        let gateway = try EmbeddedGateway(Self.yaml)
        gateway.refuseConnects(1)
        try gateway.get("/r/x")
        #expect(gateway.upstreams.count == 1)
        #expect(try gateway.request(0).hasPrefix("GET /r/x "))
        try gateway.respond(0, Self.ok("fine"))
        #expect(try gateway.answer().hasSuffix("fine"))
    }

    @Test func aStreamedUploadWhoseUpstreamBreaksHalfWayIsA502AndNotSentAgain() throws {
        let gateway = try EmbeddedGateway(Self.yaml)
        try gateway.send("POST /r/upload HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        let sent = try gateway.request(0)
        #expect(sent.hasPrefix("POST /r/upload ") && sent.hasSuffix("first\r\n"), "\(sent)")
        gateway.reset(0)
        // POST is not retried, and the body is gone anyway: one try, a 502, the client's connection closed.
        let answer = try gateway.answer()
        #expect(answer.hasPrefix("HTTP/1.1 502 Bad Gateway\r\n") && answer.contains("upstream-reset"), "\(answer)")
        #expect(gateway.upstreams.count == 1)
    }

    @Test func anAnswerValidatorsReadIsHeldUntilWhole() throws {
        let gateway = try EmbeddedGateway(Self.yaml)
        try gateway.get("/h/doc")
        _ = try gateway.request(0)
        try gateway.respond(0, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n{\"ok\":")
        #expect(try gateway.answer().isEmpty)
        try gateway.respond(0, "true} ")
        let answer = try gateway.answer()
        #expect(answer.hasPrefix("HTTP/1.1 200 OK\r\n") && answer.hasSuffix("{\"ok\":true} "), "\(answer)")
        // A refused one never reaches the client in part.
        try gateway.get("/h/bad")
        _ = try gateway.request(0)
        try gateway.respond(0, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{\"error\":1}  ")
        let refused = try gateway.answer()
        #expect(refused.hasPrefix("HTTP/1.1 502 Bad Gateway\r\n") && refused.contains("validator-failed") && !refused.contains("error\":1"), "\(refused)")
    }

    @Test func a401RefreshesTheCredentialThenReplaysWithIt() throws {
        let gateway = try EmbeddedGateway(Self.yaml)
        try gateway.get("/t/me")
        #expect(try !gateway.request(0).contains("Authorization"))
        try gateway.respond(0, Self.ok("", status: "401 Unauthorized"))
        // The token call goes to `auth` on a connection of its own.
        #expect(try gateway.answer().isEmpty)
        try #require(gateway.upstreams.count == 2)
        #expect(try gateway.request(1).hasPrefix("POST /token HTTP/1.1\r\n"))
        try gateway.respond(1, Self.ok(#"{"access_token":"t0k"}"#, "Content-Type: application/json\r\n"))
        // The refused try's connection was let go when the refresh started; the replay takes a new one.
        #expect(!gateway.upstreams[0].isActive)
        try #require(gateway.upstreams.count == 3)
        let replayed = try gateway.request(2)
        #expect(replayed.hasPrefix("GET /t/me ") && replayed.contains("Authorization: Bearer t0k\r\n"), "\(replayed)")
        try gateway.respond(2, Self.ok("me"))
        #expect(try gateway.answer().hasSuffix("\r\n\r\nme"))
    }

    /// The gateway's own call (here the token refresh) is one try on the
    /// client's path: a connection that comes after its deadline is not
    /// used, so no request goes out late.
    @Test func anOwnCallsConnectionThatComesAfterItsDeadlineCarriesNothing() throws {
        let gateway = try EmbeddedGateway(Self.yaml)
        try gateway.get("/t/me")
        gateway.holdConnects(1)
        try gateway.respond(0, Self.ok("", status: "401 Unauthorized"))
        try #require(gateway.upstreams.count == 2)
        // The route's 60 s default: the refresh and the call time out together.
        gateway.advance(.seconds(61))
        let answer = try gateway.answer()
        #expect(answer.hasPrefix("HTTP/1.1 50"), "\(answer)")
        gateway.completeHeldConnects()
        #expect(try gateway.request(1).isEmpty)
        #expect(gateway.upstreams.count == 2)
    }

    @Test func aClientThatLeavesMidAnswerTakesTheUpstreamConnectionWithIt() throws {
        let gateway = try EmbeddedGateway(Self.yaml)
        try gateway.get("/p/big")
        _ = try gateway.request(0)
        try gateway.respond(0, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf.")
        #expect(try gateway.answer().hasSuffix("half."))
        _ = gateway.client.close()
        gateway.loop.run()
        // Half an answer left unread: the connection cannot be reused.
        #expect(!gateway.upstreams[0].isActive)
    }

    @Test func aDrainLetsTheCallInFlightFinishThenCloses() throws {
        let gateway = try EmbeddedGateway(Self.yaml)
        try gateway.get("/p/x")
        _ = try gateway.request(0)
        gateway.client.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        #expect(gateway.client.isActive)
        try gateway.respond(0, Self.ok("last"))
        let answer = try gateway.answer()
        #expect(answer.contains("Connection: close\r\n") && answer.hasSuffix("last"), "\(answer)")
        #expect(!gateway.client.isActive)
    }

    @Test func a101MakesBothConnectionsOneTunnel() throws {
        let gateway = try EmbeddedGateway(Self.yaml)
        try gateway.send("GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: a2V5a2V5a2V5a2V5a2V5aw==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        let sent = try gateway.request(0)
        #expect(sent.contains("Upgrade: websocket\r\n"), "\(sent)")
        try gateway.respond(0, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: x\r\n\r\n")
        #expect(try gateway.answer().hasPrefix("HTTP/1.1 101 Switching Protocols\r\n"))
        try gateway.send("\u{81}\u{02}hi")
        #expect(try gateway.request(0) == "\u{81}\u{02}hi")
        try gateway.respond(0, "\u{81}\u{03}hey")
        #expect(try gateway.answer() == "\u{81}\u{03}hey")
        _ = gateway.upstreams[0].close()
        gateway.loop.run()
        #expect(!gateway.client.isActive)
    }

    /// A client that sends its first frames with the upgrade request, before
    /// the upstream said yes: they are neither read as a request nor sent
    /// upstream ahead of the switch; after the 101 they go through first, once.
    @Test func bytesSentAheadOfTheSwitchWaitForItThenGoThroughOnce() throws {
        let gateway = try EmbeddedGateway(Self.yaml)
        try gateway.send("GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: a2V5a2V5a2V5a2V5a2V5aw==\r\nSec-WebSocket-Version: 13\r\n\r\n\u{81}\u{05}early")
        let sent = try gateway.request(0)
        #expect(sent.hasSuffix("\r\n\r\n") && !sent.contains("early"), "\(sent)")
        try gateway.respond(0, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: x\r\n\r\n")
        #expect(try gateway.answer().hasPrefix("HTTP/1.1 101 Switching Protocols\r\n"))
        #expect(try gateway.request(0) == "\u{81}\u{05}early")
        try gateway.send("\u{81}\u{04}next")
        #expect(try gateway.request(0) == "\u{81}\u{04}next")
        #expect(gateway.upstreams.count == 1)
    }

    /// RFC 8441 over HTTP/2: DATA sent on an extended CONNECT's stream
    /// before the upstream switched waits for the switch (never in the
    /// upgrade request), then reaches the upstream first and once.
    @Test func dataSentAheadOfAnHTTP2SwitchWaitsForItThenGoesThroughOnce() throws {
        let gateway = try EmbeddedGateway(Self.yaml, http2: true)
        try gateway.send("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + String(decoding: NGHTTP2Client.frame(type: 0x4, flags: 0, stream: 0, payload: []), as: UTF8.self))
        let block = EmbeddedHandlerTests.headerBlock([(":method", "CONNECT"), (":protocol", "websocket"), (":scheme", "http"), (":authority", "h"),
                                                      (":path", "/ws"), ("sec-websocket-version", "13")])
        // END_HEADERS, not END_STREAM: the stream stays open for the tunnel; DATA follows at once.
        try gateway.client.writeInbound(ByteBuffer(bytes: NGHTTP2Client.frame(type: 0x1, flags: 0x4, stream: 1, payload: block)
                                                   + NGHTTP2Client.frame(type: 0x0, flags: 0, stream: 1, payload: Array("\u{81}\u{05}early".utf8))))
        gateway.loop.run()
        let sent = try gateway.request(0)
        #expect(sent.hasPrefix("GET /ws HTTP/1.1\r\n") && sent.contains("Upgrade: websocket\r\n") && sent.hasSuffix("\r\n\r\n")
                && !sent.contains("early"), "\(sent)")
        try gateway.respond(0, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: x\r\n\r\n")
        #expect(try gateway.request(0) == "\u{81}\u{05}early")
        var out: [UInt8] = []
        while let buffer = try gateway.client.readOutbound(as: ByteBuffer.self) { out += Array(buffer.readableBytesView) }
        let frames = EmbeddedHandlerTests.frames(out)
        // The switch is a 200 on the stream (HPACK static index 8: `:status: 200`), which stays open.
        let heads = frames.filter { $0.type == 0x1 && $0.stream == 1 }
        #expect(heads.count == 1 && heads.first?.payload.first == 0x88 && heads.first.map { $0.flags & 0x1 == 0 } == true)
        try gateway.client.writeInbound(ByteBuffer(bytes: NGHTTP2Client.frame(type: 0x0, flags: 0, stream: 1, payload: Array("\u{81}\u{04}next".utf8))))
        gateway.loop.run()
        #expect(try gateway.request(0) == "\u{81}\u{04}next")
        #expect(gateway.upstreams.count == 1 && !frames.contains { $0.type == 0x3 })
    }

    /// The first call's per-try timer (1 s) would fire 200 ms into the second
    /// call, had it outlived its call: each is answered once, on one try.
    @Test(arguments: ["once", "twice"]) func twoSlowCallsInARowOnOneConnectionAreEachAnsweredOnce(_ route: String) throws {
        let gateway = try EmbeddedGateway(Self.yaml)
        for (path, delay) in [("slow", 800), ("next", 500)] {
            try gateway.get("/\(route)/\(path)")
            #expect(try gateway.request(0).hasPrefix("GET /\(route)/\(path) "))
            gateway.advance(.milliseconds(Int64(delay)))
            try gateway.respond(0, Self.ok("done \(path)"))
            let answer = try gateway.answer()
            #expect(answer.hasPrefix("HTTP/1.1 200 OK\r\n") && answer.hasSuffix("done \(path)"), "\(answer)")
        }
        gateway.advance(.seconds(2))
        #expect(try gateway.answer().isEmpty && gateway.request(0).isEmpty && gateway.upstreams.count == 1)
    }

    @Test(arguments: ["once", "twice"]) func twoSlowStreamsInARowOnOneHTTP2ConnectionAreEachAnsweredOnce(_ route: String) throws {
        let gateway = try EmbeddedGateway(Self.yaml, http2: true)
        try gateway.send("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + String(decoding: NGHTTP2Client.frame(type: 0x4, flags: 0, stream: 0, payload: []), as: UTF8.self))
        var frames: [(type: UInt8, flags: UInt8, stream: UInt32, payload: [UInt8])] = []
        for (stream, path, delay) in [(UInt32(1), "slow", 800), (3, "next", 500)] {
            let block = EmbeddedHandlerTests.headerBlock([(":method", "GET"), (":scheme", "http"), (":authority", "h"), (":path", "/\(route)/\(path)")])
            try gateway.client.writeInbound(ByteBuffer(bytes: NGHTTP2Client.frame(type: 0x1, flags: 0x5, stream: stream, payload: block)))
            gateway.loop.run()
            #expect(try gateway.request(0).hasPrefix("GET /\(route)/\(path) "))
            gateway.advance(.milliseconds(Int64(delay)))
            try gateway.respond(0, Self.ok("done \(path)"))
            var out: [UInt8] = []
            while let buffer = try gateway.client.readOutbound(as: ByteBuffer.self) { out += Array(buffer.readableBytesView) }
            frames += EmbeddedHandlerTests.frames(out)
            let data = frames.filter { $0.type == 0x0 && $0.stream == stream }
            #expect(String(decoding: data.flatMap(\.payload), as: UTF8.self) == "done \(path)" && data.last?.flags == 0x1)
        }
        gateway.advance(.seconds(2))
        #expect(!frames.contains { $0.type == 0x3 }, "no RST_STREAM")
        #expect(try gateway.request(0).isEmpty && gateway.upstreams.count == 1)
    }
}
