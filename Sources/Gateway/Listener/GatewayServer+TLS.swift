import NIOSSL

extension GatewayServer {
    /// The listener's certificate and key, read once; ALPN offers h2 and/or
    /// http/1.1 as `protocols` says.
    static func tlsContext(_ tls: ListenerConfig.TLS, protocols: [ListenerConfig.HTTPProtocol]) throws -> NIOSSLContext {
        do {
            let chain = try NIOSSLCertificate.fromPEMFile(tls.certificate).map { NIOSSLCertificateSource.certificate($0) }
            let key = try NIOSSLPrivateKey(file: tls.privateKey, format: .pem)
            var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: .privateKey(key))
            configuration.applicationProtocols = (protocols.contains(.h2) ? ["h2"] : []) + (protocols.contains(.http1) ? ["http/1.1"] : [])
            return try NIOSSLContext(configuration: configuration)
        } catch {
            throw StartupError(message: "TLS listener: cannot use certificate \(tls.certificate) / key \(tls.privateKey): \(error)")
        }
    }
}
