import Foundation
import Testing
@testable import Gateway

/// The answer side on the wire, HTTP/1.1 and h2c: a legacy upstream's XML,
/// SOAP fault, form or JSON envelope becomes the client's typed JSON.
///
/// | hostile upstream sends | the client gets | and |
/// |---|---|---|
/// | XML that is not well-formed | 502 bad-upstream-answer | the access line says where |
/// | a DTD (billion laughs) | 502 | nothing expanded |
/// | a gzip or deflate answer (despite `Accept-Encoding: identity`) | it translated | inflated first |
/// | a compression bomb (1 MB of zeros in 1 KB of gzip) | 502 | inflation stops at `max_response_body_bytes` |
/// | a truncated gzip stream, a coding gatewayd does not decode (`br`) | 502 | |
/// | an answer past `max_response_body_bytes` | 502 | its connection dropped, memory bounded |
/// | a required field missing, a value not of its type | 502 | |
/// | a Content-Type no decoder takes (`auto`) | 502 | |
/// | after each of these | | the next call is served |
@Suite(.ownThreads) struct AnswerWireTests {
    /// What spyne 2.14's SOAP 1.1 service (Peers/soap_users.py) answers for GetUser 7 and 8, byte for byte.
    static let user = """
        <?xml version='1.0' encoding='UTF-8'?>
        <soap11env:Envelope xmlns:soap11env="http://schemas.xmlsoap.org/soap/envelope/" xmlns:tns="urn:users"><soap11env:Body><tns:GetUserResponse>\
        <tns:GetUserResult><tns:id>7</tns:id><tns:name>Ann &lt;admin&gt;</tns:name><tns:tags><tns:string>ops</tns:string></tns:tags>\
        <tns:created>2024-05-01T12:30:00+00:00</tns:created></tns:GetUserResult></tns:GetUserResponse></soap11env:Body></soap11env:Envelope>
        """
    static let fault = """
        <?xml version='1.0' encoding='UTF-8'?>
        <soap11env:Envelope xmlns:soap11env="http://schemas.xmlsoap.org/soap/envelope/"><soap11env:Body><soap11env:Fault>\
        <faultcode>soap11env:Client</faultcode><faultstring>no user 8</faultstring><faultactor></faultactor></soap11env:Fault></soap11env:Body>\
        </soap11env:Envelope>
        """
    static let bomb = #"<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]><r><id>&b;</id></r>"#

    static func answer(_ status: String, _ type: String, _ body: String, extra: String = "") -> RawUpstream.Answer {
        .init("HTTP/1.1 \(status)\r\nContent-Type: \(type)\r\nContent-Length: \(body.utf8.count)\r\n\(extra)\r\n\(body)")
    }

    /// Compressed by independent tools: gzip(1), and Python's zlib for deflate (zlib-wrapped, and raw as some servers send it).
    static let compressed: [String: [UInt8]] = {
        let xml = Array("<r><id>0042</id></r>".utf8)
        func python(_ code: String, _ input: [UInt8]) -> [UInt8] {
            (try? runPeer("/usr/bin/python3", ["-c", "import sys, zlib; sys.stdout.buffer.write(\(code))"], stdin: input).out) ?? []
        }
        let gzip = (try? runPeer("/usr/bin/gzip", ["-c"], stdin: xml).out) ?? []
        let bomb = (try? runPeer("/usr/bin/gzip", ["-c", "-9"], stdin: [UInt8](repeating: 0x20, count: 1 << 20)).out) ?? []
        return ["gzip": gzip, "deflate": python("zlib.compress(sys.stdin.buffer.read())", xml),
                "raw": python("(lambda c: c.compress(sys.stdin.buffer.read()) + c.flush())(zlib.compressobj(9, zlib.DEFLATED, -15))", xml),
                "bomb.gz": bomb, "truncated.gz": Array(gzip.dropLast(6))]
    }()

    static func upstream() -> RawUpstream {
        RawUpstream { line in
            let path = line.split(separator: " ").dropFirst().first.map(String.init) ?? ""
            switch path {
            case "/user/7": return answer("200 OK", "text/xml; charset=utf-8", user)
            case "/user/8": return answer("500 Internal Server Error", "text/xml; charset=utf-8", fault)
            case "/h/broken": return answer("200 OK", "text/xml", "<r><id>1</r></id>")
            case "/h/bomb": return answer("200 OK", "application/xml", bomb)
            case "/h/brotli": return answer("200 OK", "text/xml", "<r><id>1</id></r>", extra: "Content-Encoding: br\r\n")
            case "/h/gzip", "/h/deflate", "/h/raw", "/h/bomb.gz", "/h/truncated.gz":
                let coded = compressed[String(path.dropFirst(3))]!
                var answer = answer("200 OK", "text/xml", "", extra: "Content-Encoding: \(path.hasSuffix("deflate") || path.hasSuffix("raw") ? "deflate" : "gzip")\r\n")
                answer.bytes = Array(String(decoding: answer.bytes, as: UTF8.self).replacingOccurrences(of: "Content-Length: 0", with: "Content-Length: \(coded.count)").utf8) + coded
                return answer
            case "/h/big": return answer("200 OK", "text/xml", "<r><id>1</id>" + String(repeating: "<pad>x</pad>", count: 1000) + "</r>")
            case "/h/missing": return answer("200 OK", "text/xml", "<r><name>no id</name></r>")
            case "/h/notint": return answer("200 OK", "text/xml", "<r><id>seven</id></r>")
            case "/h/html": return answer("200 OK", "text/html", "<html></html>")
            case "/h/ok": return answer("200 OK", "application/xml", "<r><id>0042</id></r>")
            case "/p/form": return answer("200 OK", "application/x-www-form-urlencoded", "a=1&b=2&b=3")
            case "/p/envelope": return answer("200 OK", "application/json", #"{"data":{"result":{"n":"5"}},"meta":{}}"#)
            case "/p/empty": return .init("HTTP/1.1 204 No Content\r\n\r\n")
            default: return answer("404 Not Found", "text/plain", "no")
            }
        }
    }

    static func gateway(_ port: Int) async throws -> GatewayHarness {
        try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            limits: {max_response_body_bytes: 4096}
            upstreams: {legacy: {url: "http://127.0.0.1:\(port)"}}
            routes:
              - name: user
                match: {prefix: /user/}
                upstream: legacy
                response:
                  decode: auto
                  xml: {namespaces: strip, arrays: [/Envelope/Body/GetUserResponse/GetUserResult/tags/string]}
                  pick: /Envelope/Body/GetUserResponse/GetUserResult
                  fields:
                    id:    {from: /id, type: int}
                    name:  {from: /name, required: true}
                    tags:  {from: /tags/string, array: true, default: []}
                    since: {from: /created, type: timestamp_ms}
                  errors:
                    - {when: /Envelope/Body/Fault, status: 404, detail: /Envelope/Body/Fault/faultstring}
              - name: hostile
                match: {prefix: /h/}
                upstream: legacy
                response: {fields: {id: {from: /r/id, type: int, required: true}}}
              - {name: envelope, match: {prefix: /p/envelope}, upstream: legacy, response: {decode: json, pick: /data/result}}
              - {name: plain, match: {prefix: /p/}, upstream: legacy, response: {decode: auto}}
            """)
    }

    static let protocols: [[String]] = [[], ["--http2-prior-knowledge"]]

    func call(_ gateway: GatewayHarness, _ path: String, _ options: [String]) throws -> (status: String, type: String, length: String, body: String) {
        let result = try curl(["-s", "--max-time", "10", "-D", "-", "-o", "/dev/stdout"] + options + ["\(gateway.base)\(path)"])
        let text = result.text.replacingOccurrences(of: "\r\n", with: "\n")
        let parts = text.components(separatedBy: "\n\n")
        let head = parts.first ?? ""
        func field(_ name: String) -> String {
            head.split(separator: "\n").first { $0.lowercased().hasPrefix(name.lowercased() + ":") }
                .map { $0.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces) } ?? ""
        }
        let status = head.split(separator: " ").dropFirst().first.map(String.init) ?? ""
        return (status, field("Content-Type"), field("Content-Length"), parts.dropFirst().joined(separator: "\n\n"))
    }

    @Test(arguments: protocols) func aSOAPAnswerBecomesTypedJSONAndAFaultAProblem(_ options: [String]) async throws {
        let upstream = Self.upstream()
        let gateway = try await Self.gateway(try await upstream.start())
        let user = try call(gateway, "/user/7", options)
        #expect(user.status == "200" && user.type == "application/json")
        #expect(user.body == #"{"id":7,"name":"Ann <admin>","tags":["ops"],"since":1714566600000}"#)
        #expect(user.length == String(user.body.utf8.count))
        // The SOAP 1.1 fault comes with a 500: the route's `errors` make it a 404 problem.
        let fault = try call(gateway, "/user/8", options)
        #expect(fault.status == "404" && fault.type == "application/problem+json")
        let problem = try JSONSerialization.jsonObject(with: Data(fault.body.utf8)) as? [String: Any]
        #expect(problem?["detail"] as? String == "no user 8" && problem?["type"] as? String == "urn:gatewayd:problem:upstream-error")
        // The upstream was asked for an answer it need not compress.
        #expect(upstream.requests.allSatisfy { $0.text.lowercased().contains("accept-encoding: identity\r\n") })
    }

    @Test(arguments: protocols) func formAndJSONEnvelopesAndEmptyAnswers(_ options: [String]) async throws {
        let upstream = Self.upstream()
        let gateway = try await Self.gateway(try await upstream.start())
        let form = try call(gateway, "/p/form", options)
        #expect(form.body == #"{"a":"1","b":["2","3"]}"# && form.type == "application/json")
        #expect(try call(gateway, "/p/envelope", options).body == #"{"n":"5"}"#)
        let empty = try call(gateway, "/p/empty", options)
        #expect(empty.status == "204" && empty.body.isEmpty)
        #expect(try call(gateway, "/h/ok", options).body == #"{"id":42}"#)
        // Compressed answers are inflated first; the client's has no Content-Encoding.
        #expect(Self.compressed.values.allSatisfy { !$0.isEmpty })
        for path in ["/h/gzip", "/h/deflate", "/h/raw"] {
            let inflated = try call(gateway, path, options)
            #expect(inflated.body == #"{"id":42}"# && inflated.status == "200", "\(path): \(inflated)")
        }
    }

    @Test(arguments: protocols) func aHostileAnswerFailsItsCallAloneAsA502(_ options: [String]) async throws {
        let upstream = Self.upstream()
        let gateway = try await Self.gateway(try await upstream.start())
        for path in ["/h/broken", "/h/bomb", "/h/bomb.gz", "/h/truncated.gz", "/h/brotli", "/h/big", "/h/missing", "/h/notint", "/h/html"] {
            let answer = try call(gateway, path, options)
            #expect(answer.status == "502" && answer.type == "application/problem+json", "\(path): \(answer)")
            let problem = try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any]
            #expect(problem?["type"] as? String == "urn:gatewayd:problem:bad-upstream-answer", "\(path)")
            // No internals: not the parser's words, not the limit's key.
            #expect(!answer.body.contains("libxml") && !answer.body.contains("max_response_body_bytes") && !answer.body.contains("line 1"), "\(path)")
            #expect(try call(gateway, "/h/ok", options).body == #"{"id":42}"#, "served after \(path)")
        }
    }

    /// A translated answer is read whole, and its upstream connection goes back to the pool: one connection for five calls.
    @Test(arguments: protocols) func aTranslatedAnswerKeepsItsUpstreamConnection(_ options: [String]) async throws {
        let upstream = Self.upstream()
        let gateway = try await Self.gateway(try await upstream.start())
        for _ in 0..<5 { #expect(try call(gateway, "/user/7", options).status == "200") }
        #expect(upstream.requests.count == 5 && Set(upstream.requests.map(\.connection)).count == 1, "\(upstream.requests.map(\.connection))")
    }

    @Test func validatorsJudgeTheDecodedDocument() async throws {
        let upstream = Self.upstream()
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            upstreams: {legacy: {url: "http://127.0.0.1:\(try await upstream.start())"}}
            routes:
              - name: user
                upstream: legacy
                response: {xml: {namespaces: strip}, pick: /Envelope/Body}
                validate:
                  - json: {pointer: /Envelope/Body/Fault, absent: true}
                    else: fail
            """)
        #expect(try call(gateway, "/user/7", []).status == "200")
        let refused = try call(gateway, "/user/8", [])
        #expect(refused.status == "502" && refused.body.contains("validator-failed"))
    }

    @Test(arguments: protocols) func aJSONAPIInFrontOfARealSOAPService(_ options: [String]) async throws {
        let service = try SOAPService()
        defer { service.stop() }
        let config = try String(contentsOf: OTLPReceiver.root.appendingPathComponent("config/examples/soap-users.yaml"), encoding: .utf8)
            .replacingOccurrences(of: "127.0.0.1:8080", with: "127.0.0.1:0").replacingOccurrences(of: "127.0.0.1:8000", with: "127.0.0.1:\(service.port)")
        let gateway = try await GatewayHarness.start(config)
        let user = try call(gateway, "/users/7", options)
        #expect(user.status == "200" && user.type == "application/json")
        #expect(user.body == #"{"id":7,"name":"Ann <admin>","tags":["ops"],"since":1714566600000}"#)
        let fault = try call(gateway, "/users/8", options)
        #expect(fault.status == "404" && fault.body.contains(#""detail":"no user 8""#))
        // What reached the SOAP service, byte for byte: the SOAP 1.1 envelope, its action, no compression.
        let requests = await service.requests(count: 2)
        #expect(requests.first?["action"] as? String == #""GetUser""# && requests.first?["encoding"] as? String == "identity")
        #expect(requests.first?["body"] as? String == """
            <?xml version="1.0" encoding="utf-8"?>
            <soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body><GetUser xmlns="urn:users"><id>7</id></GetUser>\
            </soap:Body></soap:Envelope>
            """)
    }
}

/// The SOAP 1.1 user service of `Peers/soap_users.py` (spyne), on 127.0.0.1.
final class SOAPService: @unchecked Sendable {
    static let script = OTLPReceiver.root.appendingPathComponent("Tests/GatewayTests/Peers/soap_users.py").path
    let port: Int
    private let peer: BackgroundPeer

    init() throws {
        peer = try BackgroundPeer(OTLPReceiver.python, [Self.script])
        guard peer.waitFor("\n", seconds: 20), let port = Int(peer.output.split(separator: "\n").first ?? "") else {
            peer.process.kill()
            throw CocoaError(.fileReadUnknown)
        }
        self.port = port
    }

    deinit { stop() }

    func stop() { peer.process.kill() }

    /// The requests logged so far (action, accepted encoding, body), once `count` came.
    func requests(count: Int) async -> [[String: Any]] {
        func read() -> [[String: Any]] {
            peer.readWritten()
            return peer.output.split(separator: "\n").dropFirst().compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
        }
        _ = await eventually(timeout: 15) { read().count >= count }
        return read()
    }
}
