import NIOCore
import NIOHTTP1
import Rewriter
import Testing
@testable import Gateway

/// The HTTP/1.1 request and answer readers, fed each message whole, byte by
/// byte and split at every position: the parts must not depend on how the
/// bytes arrived, and everything RFC 9112 lets a reader refuse is refused.
@Suite(.ownThreads) struct HTTP1DecoderTests {
    /// Parts as text: "GET /a HTTP/1.1 [Host: x]", "body:hello" (consecutive
    /// body parts joined), "end".
    static func requestParts(_ chunks: [[UInt8]], maxHeadBytes: Int = 4096) throws(HTTP1ParseError) -> [String] {
        var decoder = HTTP1RequestDecoder(maxHeadBytes: maxHeadBytes)
        var buffer = ByteBuffer()
        var parts: [String] = []
        for chunk in chunks {
            buffer.cumulate(ByteBuffer(bytes: chunk))
            while let part = try decoder.next(&buffer) {
                add(part, to: &parts) { "\($0.method.rawValue) \($0.uri) HTTP/\($0.version.major).\($0.version.minor) \(fields($0.headers))" }
            }
        }
        return parts
    }

    /// A part as text: its head as `describe` says, body parts joined, "end".
    static func add<Head>(_ part: HTTPPart<Head, ByteBuffer>, to parts: inout [String], describe: (Head) -> String) {
        switch part {
        case .head(let head):
            parts.append(describe(head))
        case .body(let body):
            let text = String(buffer: body)
            if let last = parts.last, last.hasPrefix("body:") {
                parts[parts.count - 1] = last + text
            } else {
                parts.append("body:" + text)
            }
        case .end:
            parts.append("end")
        }
    }

    static func fields(_ headers: HeaderList) -> String {
        "[" + headers.map { "\($0.name): \($0.value)" }.joined(separator: ", ") + "]"
    }

    /// The same bytes whole, byte by byte and split in two at every position.
    static func splits(_ text: String) -> [[[UInt8]]] {
        let bytes = Array(text.utf8)
        var all: [[[UInt8]]] = [[bytes], bytes.map { [$0] }]
        for cut in 1..<bytes.count { all.append([Array(bytes[..<cut]), Array(bytes[cut...])]) }
        return all
    }

    static let valid: [(String, [String])] = [
        ("GET /a?b=c HTTP/1.1\r\nHost: x\r\nX-Empty:\r\nX-Space:  v  w \t\r\n\r\n",
         ["GET /a?b=c HTTP/1.1 [Host: x, X-Empty: , X-Space: v  w]", "end"]),
        ("\r\n\r\nGET / HTTP/1.0\r\n\r\n", ["GET / HTTP/1.0 []", "end"]),
        ("POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello", ["POST /p HTTP/1.1 [Host: h, Content-Length: 5]", "body:hello", "end"]),
        ("PUT /p HTTP/1.1\r\nHost: h\r\nContent-Length: 3, 3\r\n\r\nabc", ["PUT /p HTTP/1.1 [Host: h, Content-Length: 3, 3]", "body:abc", "end"]),
        ("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5;name=\"v\"\r\nhello\r\n6 ; x\r\n world\r\nA\r\n0123456789\r\n0\r\nTrailer: t\r\n\r\n",
         ["POST / HTTP/1.1 [Host: h, Transfer-Encoding: chunked]", "body:hello world0123456789", "end"]),
        ("GET /1 HTTP/1.1\r\nHost: h\r\n\r\nDELETE /2 HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nokGET /3 HTTP/1.1\r\nHost: h\r\n\r\n",
         ["GET /1 HTTP/1.1 [Host: h]", "end", "DELETE /2 HTTP/1.1 [Host: h, Content-Length: 2]", "body:ok", "end", "GET /3 HTTP/1.1 [Host: h]", "end"]),
        ("GET / HTTP/1.1\r\nHost: h\r\nX-Name: Zo\u{00EB} \u{2713}\r\n\r\n", ["GET / HTTP/1.1 [Host: h, X-Name: Zo\u{00EB} \u{2713}]", "end"]),
        ("M-SEARCH * HTTP/1.1\r\nHost: h\r\n\r\n", ["M-SEARCH * HTTP/1.1 [Host: h]", "end"]),
    ]

    @Test(arguments: valid)
    func readsRequestsHoweverTheBytesArrive(_ input: String, _ expected: [String]) throws {
        for chunks in Self.splits(input) {
            #expect(try Self.requestParts(chunks) == expected)
        }
    }

    static let refused: [(String, HTTP1ParseError)] = [
        ("GET / HTTP/1.1\r\nHost: h\r\nHost : x\r\n\r\n", .malformed("a header field name is not a token followed by a colon")),
        ("GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n", .malformed("a header line is folded (obsolete line folding)")),
        ("GET / HTTP/1.1\nHost: x\n\n", .malformed("a line ends in LF without CR")),
        ("GET / HTTP/1.1\r\nHost: h\r\n: x\r\n\r\n", .malformed("a header field has no name")),
        ("GET / HTTP/1.1\r\nHost: h\r\nX: a\u{1}b\r\n\r\n", .malformed("header field X holds a control character")),
        ("GET / HTTP/1.1\r\nHost: h\r\nX: a\rb\r\n\r\n", .malformed("header field X holds a control character")),
        ("GET /a b HTTP/1.1\r\n\r\n", .malformed("the protocol version is not HTTP/x.y")),
        ("GET /a\u{7F} HTTP/1.1\r\nHost: h\r\n\r\n", .malformed("the request target is missing or holds a byte outside visible ASCII")),
        ("GET /\u{00E9} HTTP/1.1\r\nHost: h\r\n\r\n", .malformed("the request target is missing or holds a byte outside visible ASCII")),
        ("G(T / HTTP/1.1\r\nHost: h\r\n\r\n", .malformed("the request line does not start with a method and a space")),
        ("GET / HTTP/1.1x\r\n\r\n", .malformed("the protocol version is not HTTP/x.y")),
        ("GET / HTTP/1.1\r\n\r\n", .malformed("the HTTP/1.1 request has no Host field")),
        ("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", .malformed("the request has more than one Host field")),
        ("GET / HTTP/1.0\r\nHost: a\r\nhost: a\r\n\r\n", .malformed("the request has more than one Host field")),
        ("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", .malformed("the Host field is not a host and port")),
        ("GET / HTTP/1.1\r\nHost: user@evil.example\r\n\r\n", .malformed("the Host field is not a host and port")),
        ("GET / HTTP/2.0\r\n\r\n", .unsupportedVersion("HTTP/2.0")),
        ("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
         .malformed("the request has both Content-Length and Transfer-Encoding")),
        ("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", .malformed("the Content-Length values differ")),
        ("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +3\r\n\r\nabc", .malformed("Content-Length is not a number")),
        ("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0x3\r\n\r\nabc", .malformed("Content-Length is not a number")),
        ("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", .unsupportedTransferCoding("gzip")),
        ("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", .malformed("the request is chunked more than once")),
        ("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", .malformed("Transfer-Encoding in an HTTP/1.0 request")),
        ("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", .malformed("a chunk size is not a hexadecimal number")),
        ("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000000\r\n", .malformed("a chunk size is too large")),
        ("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloX\r\n0\r\n\r\n", .malformed("chunk data is longer than its size")),
        ("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n", .malformed("a chunk size line does not end in CRLF")),
        ("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5 5\r\nhello\r\n", .malformed("a chunk size is not a hexadecimal number")),
        ("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5;a\u{0}\r\nhello\r\n", .malformed("a chunk extension holds a control character")),
    ]

    @Test(arguments: refused)
    func refusesWhatCouldBeReadTwoWays(_ input: String, _ error: HTTP1ParseError) {
        for chunks in Self.splits(input) {
            #expect(throws: error) { try Self.requestParts(chunks) }
        }
    }

    /// What the decoder notes of each head (the connection acts on these
    /// without reading the head again) agrees with the head's own fields.
    @Test(arguments: [
        ("GET / HTTP/1.1\r\nHost: a\r\n\r\n", RequestFraming.none, false, false, true),
        ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", .length(0), false, false, true),
        ("PUT / HTTP/1.1\r\nHost: a\r\ncontent-length: 5, 5\r\nConnection: close\r\n\r\nhello", .length(5), false, false, false),
        ("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n0\r\n\r\n", .streamed, false, false, true),
        ("HEAD / HTTP/1.0\r\n\r\n", .none, true, true, false),
        ("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", .none, false, true, true),
    ])
    func notesWhatEachHeadSays(input: String, framing: RequestFraming, isHEAD: Bool, isHTTP10: Bool, keepsAlive: Bool) throws {
        var decoder = HTTP1RequestDecoder(maxHeadBytes: 4096)
        var buffer = ByteBuffer(string: input)
        guard case .head(let head) = try decoder.next(&buffer) else { Issue.record("no head"); return }
        let notes = decoder.lastHead
        #expect(notes.framing == framing)
        #expect(notes.isHEAD == isHEAD && notes.isHTTP10 == isHTTP10)
        #expect(notes.keepsAlive == keepsAlive && notes.keepsAlive == head.keepsAlive)
    }

    /// `Connection` tokens: case, spaces and tabs around them, lists, and
    /// names that only begin or end like a token.
    @Test(arguments: [
        ("close", true, false), (" Close ", true, false), ("CLOSE\t, x", true, false), ("keep-alive, Upgrade", false, true),
        ("Upgrade,Keep-Alive", false, true), ("close,keep-alive", true, true), ("x-close", false, false), ("closed", false, false),
        ("clo se", false, false), ("", false, false), (",, ,", false, false), ("keep-alive x", false, true), ("kéep-alive", false, false),
    ])
    func connectionTokens(value: String, close: Bool, keepAlive: Bool) {
        var options = ConnectionOptions()
        options.read(value)
        #expect(options.close == close)
        #expect(options.keepAlive == keepAlive)
    }

    @Test func refusesBytesThatAreNotUTF8AndHeadsOverTheLimit() {
        let latin1 = Array("GET / HTTP/1.1\r\nX: caf".utf8) + [0xE9] + Array("\r\n\r\n".utf8)
        #expect(throws: HTTP1ParseError.malformed("header field X is not valid UTF-8")) { try Self.requestParts([latin1]) }
        let big = "GET / HTTP/1.1\r\nX: " + String(repeating: "a", count: 200) + "\r\n\r\n"
        #expect(throws: HTTP1ParseError.headTooLarge(limit: 100)) { try Self.requestParts([Array(big.utf8)], maxHeadBytes: 100) }
        // Never ending: refused as soon as the limit is passed, not when the head ends.
        let endless = Array(repeating: Array("X: y\r\n".utf8), count: 30).flatMap { $0 }
        #expect(throws: HTTP1ParseError.headTooLarge(limit: 100)) {
            try Self.requestParts([Array("GET / HTTP/1.1\r\n".utf8)] + [endless], maxHeadBytes: 100)
        }
    }

    /// Answers, for a request of `method`; `closed`: the upstream closes after the bytes.
    static func answerParts(_ chunks: [[UInt8]], method: HTTPMethod = .GET, closed: Bool = false) throws(HTTP1ParseError) -> (parts: [String], mustClose: Bool) {
        var decoder = HTTP1ResponseDecoder(maxHeadBytes: 4096)
        decoder.expect(method: method)
        var buffer = ByteBuffer()
        var parts: [String] = []
        func add(_ part: ResponsePart) { Self.add(part, to: &parts) { "\($0.status.code) \(fields($0.headers))" } }
        for chunk in chunks {
            buffer.cumulate(ByteBuffer(bytes: chunk))
            while let part = try decoder.next(&buffer) { add(part) }
        }
        if closed, let part = try decoder.inputClosed() { add(part) }
        return (parts, decoder.mustClose || decoder.announcedBodyWithheld)
    }

    static let answers: [(String, HTTPMethod, Bool, [String], Bool)] = [
        ("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", .GET, false, ["200 [Content-Length: 5]", "body:hello", "end"], false),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nX-Trailer: t\r\n\r\n", .GET, false,
         ["200 [Transfer-Encoding: chunked]", "body:hello", "end"], false),
        ("HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close", .GET, true,
         ["200 [Content-Type: text/plain]", "body:until close", "end"], true),
        ("HTTP/1.1 200 OK\nContent-Length: 2\n\nok", .GET, false, ["200 [Content-Length: 2]", "body:ok", "end"], false),
        // Body-less by rule though a body is announced: the upstream may still send it, so the connection is not reused.
        ("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", .HEAD, false, ["200 [Content-Length: 5]", "end"], true),
        ("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", .HEAD, false, ["200 [Content-Length: 0]", "end"], false),
        ("HTTP/1.1 204\r\n\r\n", .DELETE, false, ["204 []", "end"], false),
        ("HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n", .GET, false, ["304 [Content-Length: 9]", "end"], true),
        ("HTTP/1.1 304 Not Modified\r\n\r\n", .GET, false, ["304 []", "end"], false),
        ("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nx", .POST, false,
         ["100 []", "201 [Content-Length: 1]", "body:x", "end"], false),
    ]

    @Test(arguments: answers)
    func readsAnswersHoweverTheBytesArrive(_ input: String, _ method: HTTPMethod, _ closed: Bool, _ expected: [String], _ mustClose: Bool) throws {
        for chunks in Self.splits(input) {
            let (parts, close) = try Self.answerParts(chunks, method: method, closed: closed)
            #expect(parts == expected)
            #expect(close == mustClose)
        }
    }

    @Test func refusesBrokenAnswers() {
        #expect(throws: HTTP1ParseError.malformed("the status code is not three digits")) {
            try Self.answerParts([Array("HTTP/1.1 2000 OK\r\n\r\n".utf8)])
        }
        #expect(throws: HTTP1ParseError.malformed("the status line is not HTTP/x.y and a code")) {
            try Self.answerParts([Array("ICY 200 OK\r\n\r\n".utf8)])
        }
        // Framed both ways (RFC 9112 section 6.3: "ought to be handled as an error"), as nginx refuses it.
        #expect(throws: HTTP1ParseError.malformed("the answer has both Content-Length and Transfer-Encoding")) {
            try Self.answerParts([Array("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n".utf8)])
        }
        // Cut short: the connection closed before the announced length.
        #expect(throws: HTTP1ParseError.malformed("the connection closed before the body ended")) {
            try Self.answerParts([Array("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc".utf8)], closed: true)
        }
    }

    /// Mutated messages (bytes flipped, inserted, dropped, repeated) split at
    /// random points: every one is read or refused — no trap, no endless loop.
    @Test func mutatedInputIsReadOrRefusedNeverATrap() {
        var random = SplitMix64(seed: 0x6761_7465_7761_7964)
        let requests = Self.valid.map(\.0) + Self.refused.map(\.0)
        let answers = Self.answers.map(\.0)
        var outcomes = (read: 0, refused: 0)
        for round in 0..<20000 {
            let source = round % 2 == 0 ? requests : answers
            var bytes = Array(source[Int(random.next() % UInt64(source.count))].utf8)
            for _ in 0..<(1 + random.next() % 4) where !bytes.isEmpty {
                let at = Int(random.next() % UInt64(bytes.count))
                switch random.next() % 4 {
                case 0: bytes[at] = UInt8(truncatingIfNeeded: random.next())
                case 1: bytes.insert([0, 9, 10, 13, 32, 58, 59, 127, 255][Int(random.next() % 9)], at: at)
                case 2: bytes.remove(at: at)
                default: bytes.insert(contentsOf: bytes[at...].prefix(8), at: at)
                }
            }
            let cut = bytes.isEmpty ? 0 : Int(random.next() % UInt64(bytes.count))
            let chunks = [Array(bytes[..<cut]), Array(bytes[cut...])]
            do {
                if round % 2 == 0 {
                    _ = try Self.requestParts(chunks)
                } else {
                    _ = try Self.answerParts(chunks, closed: random.next() % 2 == 0)
                }
                outcomes.read += 1
            } catch {
                outcomes.refused += 1
            }
        }
        // Both outcomes occur: the mutations reach the checks, not only the happy path.
        #expect(outcomes.read > 100 && outcomes.refused > 100)
    }

    /// The token bitmap is RFC 9110's tchar, byte for byte.
    @Test func tokenCharactersAreTheRFCs() {
        let tchar = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
        for byte in UInt8.min...UInt8.max { #expect(byte.isTokenChar == tchar.contains(byte), "byte \(byte)") }
    }

    /// The eight-bytes-at-a-time value check says what a byte loop says, for
    /// values of every length up to 40 made of the bytes that matter.
    @Test func valueCheckAgreesWithTheByteLoop() {
        var random = SplitMix64(seed: 0x7661_6C75_6573)
        let bytes: [UInt8] = [0, 8, 9, 10, 13, 31, 32, 65, 126, 127, 128, 0xC3, 0xA9, 255]
        for _ in 0..<20000 {
            let value = (0..<Int(random.next() % 41)).map { _ in random.next() % 4 == 0 ? bytes[Int(random.next() % 14)] : 97 }
            let expected: Bool? = value.contains { $0 < 0x20 && $0 != 9 || $0 == 0x7F } ? nil : value.allSatisfy { $0 < 0x80 }
            value.withUnsafeBytes { #expect(HTTP1HeadReader.valueBytes($0) == expected, "\(value)") }
        }
    }

    /// An answer's fields go back out from their received bytes, edited as
    /// forwarding edits them, exactly as from the list they read into: for
    /// every combination of the edits, on answers with hop-by-hop fields, a
    /// Connection naming another field, an X-Request-Id of their own,
    /// repeated names, bare LF line ends, whitespace and non-ASCII values.
    @Test func receivedFieldsGoOutAsTheirListWould() throws {
        let answers = [
            "HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: Wed, 25 Nov 2026 06:12:07 GMT\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\n",
            "HTTP/1.1 200 OK\r\nX-Request-Id: theirs\r\nkeep-alive: timeout=5\r\nTE: trailers\r\nx-request-id: again\r\nContent-Type: a\r\n\r\n",
            "HTTP/1.1 200 OK\nConnection: close, X-Private\nX-Private: secret\nContent-Type:text/plain  \nSet-Cookie: a=1\nSet-Cookie: b=2\n\n",
            "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\nUpgrade: h2c\r\nX-Note: \u{e9}t\u{e9}\t\r\nProxy-Connection: x\r\n\r\n",
            "HTTP/1.1 204 No Content\r\n\r\n",
        ]
        for answer in answers {
            var decoder = HTTP1ResponseDecoder(maxHeadBytes: 4096)
            decoder.expect(method: .GET)
            var buffer = ByteBuffer(string: answer)
            guard case .head(let head)? = try decoder.next(&buffer) else { Issue.record("no head in \(answer)"); continue }
            #expect(head.received != nil)
            for edits in 0..<16 {
                var received = head
                var list = ResponseHead(version: head.version, status: head.status, headers: head.headers)
                if edits & 1 != 0 { received.removeHopByHop(); list.removeHopByHop() }
                if edits & 2 != 0 { received.set("X-Request-Id", "ours"); list.set("X-Request-Id", "ours") }
                if edits & 4 != 0 { received.set("Content-Type", "text/html"); list.set("Content-Type", "text/html") }
                if edits & 8 != 0 { received.set("Connection", "close"); list.set("Connection", "close") }
                var a = ByteBuffer(), b = ByteBuffer()
                let hasA = a.writeStatusLine(received), hasB = b.writeStatusLine(list)
                #expect(a == b, "edits \(edits) of \(answer)")
                #expect(hasA == hasB && received.headers == list.headers)
            }
        }
        // What the usual forwarded answer becomes: hop-by-hop fields gone, the
        // request id in place of the upstream's, the rest as it came.
        var decoder = HTTP1ResponseDecoder(maxHeadBytes: 4096)
        var buffer = ByteBuffer(string: answers[1])
        guard case .head(var head)? = try decoder.next(&buffer) else { Issue.record("no head"); return }
        head.removeHopByHop()
        head.set("X-Request-Id", "ours")
        var out = ByteBuffer()
        _ = out.writeStatusLine(head)
        #expect(String(buffer: out) == "HTTP/1.1 200 OK\r\nX-Request-Id: ours\r\nContent-Type: a\r\n")
    }
}
