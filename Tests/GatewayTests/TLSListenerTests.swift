import Foundation
import NIOSSL
import Testing
@testable import Gateway

/// TLS listeners: ALPN picks h2 or http/1.1; curl and nghttp as clients.
@Suite(.ownThreads) struct TLSListenerTests {
    static func makeCertificate() throws -> (certificate: String, key: String) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tls-\(getpid())-\(UInt32.random(in: 0 ... .max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let certificate = dir.appendingPathComponent("cert.pem").path, key = dir.appendingPathComponent("key.pem").path
        let result = try runPeer("/usr/bin/openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", certificate,
                                                      "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"])
        guard result.status == 0 else { throw StartupError(message: "openssl failed: \(result.err)") }
        return (certificate, key)
    }

    @Test func alpnServesHTTP2AndHTTP1() async throws {
        let (certificate, key) = try Self.makeCertificate()
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0, tls: {certificate: "\(certificate)", private_key: "\(key)"}}]
            routes: [{name: echo, upstream: echo}]
            """)
        let url = "https://127.0.0.1:\(gateway.port)/tls?x=1"
        let h2 = try curl(["-k", "-i", "--http2", url]).text
        #expect(h2.hasPrefix("HTTP/2 200"))
        #expect(h2.contains(#"["X-Forwarded-Proto","https"]"#))
        let h1 = try curl(["-k", "-i", "--http1.1", url]).text
        #expect(h1.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(h1.contains(#""path":"/tls","query":"x=1""#))
        let nghttp = try runPeer("/usr/bin/nghttp", ["-v", url])
        #expect(nghttp.text.contains("The negotiated protocol: h2"))
        #expect(nghttp.text.contains(":status: 200"))
        // Plain HTTP on a TLS port is not served.
        #expect(try curl(["-i", "http://127.0.0.1:\(gateway.port)/"]).text.isEmpty)
    }

    @Test func unreadableCertificateIsAClearError() async throws {
        let config = try ConfigLoader.load(yaml: """
            listeners: [{address: 127.0.0.1:0, tls: {certificate: /nonexistent/cert.pem, private_key: /nonexistent/key.pem}}]
            """).config
        let server = GatewayServer(config: config, threads: 1)
        Teardown.register { try? await server.shutdown() }
        await #expect(throws: StartupError.self) { _ = try await server.start() }
        try await server.shutdown()
    }

    @Test func httpsUpstreamsAreVerified() async throws {
        let (certificate, key) = try Self.makeCertificate()
        let serverTLS = try NIOSSLContext(configuration: .makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem))))
        let upstream = RecordingUpstream(tls: serverTLS)
        let port = try await upstream.start()
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            upstreams:
              trusted: {url: "https://127.0.0.1:\(port)/v1", tls: {ca_file: "\(certificate)"}}
              untrusted: {url: "https://127.0.0.1:\(port)/v1"}
            routes:
              - {name: trusted, upstream: trusted, match: {prefix: /trusted}}
              - {name: untrusted, upstream: untrusted, match: {prefix: /untrusted}}
            """)
        let ok = try curl(["-i", "\(gateway.base)/trusted/x?y=1"]).text
        #expect(ok.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(upstream.requests.first?.uri == "/v1/trusted/x?y=1")
        let refused = try curl(["-i", "\(gateway.base)/untrusted/x"]).text
        #expect(refused.hasPrefix("HTTP/1.1 502 Bad Gateway\r\n"))
        #expect(upstream.requests.count == 1)
    }

    /// h2 over TLS to the upstream (ALPN h2), on libnghttp2's client session:
    /// calls are streams on one verified connection.
    @Test func http2UpstreamsOverTLSMultiplexOnOneConnection() async throws {
        let (certificate, key) = try Self.makeCertificate()
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
        configuration.applicationProtocols = ["h2"]
        let upstream = RecordingUpstream(tls: try NIOSSLContext(configuration: configuration), http2: true)
        let port = try await upstream.start()
        let gateway = try await GatewayHarness.start("""
            listeners: [{address: 127.0.0.1:0}]
            upstreams: {secure: {url: "https://127.0.0.1:\(port)/v2", http2: true, tls: {ca_file: "\(certificate)"}}}
            routes: [{name: secure, upstream: secure}]
            """)
        for n in 1...3 { #expect(try curl(["-s", "\(gateway.base)/item/\(n)"]).text == "ok") }
        #expect(upstream.requests.map(\.uri) == ["/v2/item/1", "/v2/item/2", "/v2/item/3"])
        #expect(upstream.connections == 1)
    }
}
