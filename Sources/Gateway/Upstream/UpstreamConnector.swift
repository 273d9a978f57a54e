import NIOCore
import NIOPosix

/// How a pool reaches an endpoint: a TCP connection (`tcp`, the daemon's),
/// or one made in process (tests drive the upstream side of a call on an
/// `EmbeddedChannel`, as async-http-client's do). `initialize` adds the
/// pool's handlers (TLS, the protocol's) before the channel is active.
package struct UpstreamConnector: Sendable {
    package typealias Connect = @Sendable (_ url: UpstreamURL, _ loop: any EventLoop, _ timeout: TimeAmount,
                                           _ initialize: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>) -> EventLoopFuture<any Channel>
    package let connect: Connect

    package init(_ connect: @escaping Connect) { self.connect = connect }

    /// TCP with Nagle off and the upstream's connect timeout.
    package static let tcp = UpstreamConnector { url, loop, timeout, initialize in
        ClientBootstrap(group: loop)
            .connectTimeout(timeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer(initialize)
            .connect(host: url.host, port: url.port)
    }
}
