import NIOCore
import NIOEmbedded
import Testing
@testable import Gateway

/// A tunnel as a value between two ends, without sockets: bytes each way,
/// and everything let go once it closes.
@Suite struct TunnelTests {
    /// An end as the connection handlers are: it holds the tunnel it carries.
    final class End: TunnelEnd {
        var tunnel: Tunnel?
        var written: [String] = []
        var closed = false
        func tunnelWrite(_ buffer: ByteBuffer) { written.append(String(buffer: buffer)) }
        func flushTunnel() {}
        var tunnelWritable: Bool { true }
        func setTunnelReading(_ on: Bool) {}
        func closeTunnel() { closed = true }
    }

    /// The owner of the access line (the client's exchange), held by `ended`.
    final class Owner {
        var lines: [String] = []
    }

    @Test func aClosedTunnelReleasesItsEndsAndItsOwner() {
        let loop = EmbeddedEventLoop()
        weak var weakTunnel: Tunnel?
        weak var weakClient: End?
        weak var weakOwner: Owner?
        do {
            let (client, upstream, owner) = (End(), End(), Owner())
            let tunnel = Tunnel(client: client, upstream: upstream, idleTimeout: .seconds(60), on: loop) { tunnel in
                owner.lines.append("\(tunnel.bytesFromClient) \(tunnel.bytesFromUpstream)")
            }
            (client.tunnel, upstream.tunnel) = (tunnel, tunnel)
            tunnel.fromClient(ByteBuffer(string: "ping"))
            tunnel.fromUpstream(ByteBuffer(string: "pong!"))
            #expect(upstream.written == ["ping"] && client.written == ["pong!"])
            tunnel.close()
            tunnel.close()
            #expect(client.closed && upstream.closed && owner.lines == ["4 5"])
            // Bytes after the close go nowhere.
            tunnel.fromClient(ByteBuffer(string: "late"))
            #expect(upstream.written == ["ping"])
            (weakTunnel, weakClient, weakOwner) = (tunnel, client, owner)
        }
        #expect(weakTunnel == nil && weakClient == nil && weakOwner == nil, "a closed tunnel and its ends hold each other")
        try? loop.syncShutdownGracefully()
    }
}
