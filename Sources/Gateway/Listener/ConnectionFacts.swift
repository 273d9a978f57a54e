import NIOCore
import NIOSSL

/// What a client's connection is, as filters read it (Envoy's
/// `source.port`, `destination.address`, `connection.tls_version`): taken
/// from the channel once per connection, when a filter first asks (a
/// request has come, so a TLS handshake is done).
struct ConnectionFacts {
    var peerPort: Int?
    /// `host:port` the client connected to.
    var localAddress = ""
    /// As Envoy names it (`TLSv1.3`); nil on a cleartext connection.
    var tlsVersion: String?

    init() {}

    init(_ context: ChannelHandlerContext?) {
        guard let context else { return }
        peerPort = context.channel.remoteAddress?.port
        localAddress = context.channel.localAddress?.hostAndPort ?? ""
        tlsVersion = (try? context.pipeline.syncOperations.nioSSL_tlsVersion()).map(Self.name)
    }

    static func name(_ version: TLSVersion) -> String {
        switch version {
        case .tlsv1: "TLSv1"
        case .tlsv11: "TLSv1.1"
        case .tlsv12: "TLSv1.2"
        case .tlsv13: "TLSv1.3"
        }
    }
}
