import CoreMetrics
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// The store's Redis: one pipelined connection shared by every event loop
/// (each command is a few dozen bytes answered in microseconds; more
/// connections would only cost the server). Connected on first use. A
/// command unanswered within `timeout` closes the connection, and a closed
/// or refused connection puts the store down for a backoff (100 ms doubling
/// up to 5 s) during which commands fail at once: no caller waits on a store
/// known to be down. When the backoff ends the client tries again by itself
/// (a PING), so the store is back up, and shown so, without waiting for a
/// call. Each change between up and down is logged once.
package final class RedisClient: Sendable {
    package enum Health: Sendable, Equatable {
        case unknown, up
        case down(String)
    }

    let config: StoreConfig
    private let loop: any EventLoop
    /// Where replies complete.
    var eventLoop: any EventLoop { loop }
    let logger: Logger
    private let tls: NIOSSLContext?
    private let state = Mutex(State())
    /// The end of the current backoff (uptime ns), apart from `state`: every
    /// fleet call reads it, without taking the lock.
    private let downUntil = Atomic<UInt64>(0)
    private let upGauge: Gauge
    private let commands: Counter
    private let failures: Counter

    private struct State {
        var connection = Connection.idle
        var backoff = Duration.milliseconds(100)
        var health = Health.unknown
        /// `close()` was called: a connection that completes later is closed at once.
        var closed = false
    }

    private enum Connection {
        case idle
        case connecting(EventLoopFuture<any Channel>)
        case connected(any Channel)
        case down(until: NIODeadline)
    }

    package init(config: StoreConfig, loop: any EventLoop, logger: Logger, factory: any MetricsFactory) throws {
        self.config = config
        self.loop = loop
        self.logger = logger
        var tlsConfiguration = TLSConfiguration.makeClientConfiguration()
        if let caFile = config.caFile { tlsConfiguration.additionalTrustRoots = [.file(caFile)] }
        tls = config.tls ? try NIOSSLContext(configuration: tlsConfiguration) : nil
        upGauge = Gauge(label: "gatewayd_store_up", factory: factory)
        commands = Counter(label: "gatewayd_store_commands_total", factory: factory)
        failures = Counter(label: "gatewayd_store_failures_total", factory: factory)
    }

    /// Up, down (and why), or not tried yet: for the admin endpoint.
    package var health: Health { state.withLock { $0.health } }

    /// False while the store is down and its backoff has not passed: callers decide locally meanwhile.
    var isAvailable: Bool { NIODeadline.now().uptimeNanoseconds >= downUntil.load(ordering: .relaxed) }

    /// The reply to `arguments` (a Redis error reply included), or a
    /// `StoreFailure` within `timeout`. Completes on the client's event loop.
    func send(_ arguments: [String]) -> EventLoopFuture<RedisValue> {
        var encoded = ByteBuffer()
        RedisCommand.encode(arguments, into: &encoded)
        let bytes = encoded
        let reply = loop.makePromise(of: RedisValue.self)
        commands.increment()
        loop.execute { self.submit(bytes, reply) }
        return reply.futureResult
    }

    /// Closes the connection (the server is stopping).
    package func close() {
        loop.execute {
            let connection = self.state.withLock { state in
                defer { (state.connection, state.closed) = (.down(until: .distantFuture), true) }
                return state.connection
            }
            self.downUntil.store(.max, ordering: .relaxed)
            if case .connected(let channel) = connection { channel.close(promise: nil) }
        }
    }

    private func submit(_ bytes: ByteBuffer, _ reply: EventLoopPromise<RedisValue>) {
        let connection = state.withLock { $0.connection }
        switch connection {
        case .connected(let channel):
            write(bytes, reply, on: channel)
        case .connecting(let channel):
            channel.whenComplete { result in
                switch result {
                case .success(let channel): self.write(bytes, reply, on: channel)
                case .failure(let error): reply.fail(error)
                }
            }
        case .down(let until) where NIODeadline.now() < until:
            reply.fail(StoreFailure(description: "the store is down"))
        case .idle, .down:
            // Connecting before the attempt starts: an attempt that fails at once leaves the store down, not connecting.
            let channel = loop.makePromise(of: (any Channel).self)
            state.withLock { $0.connection = .connecting(channel.futureResult) }
            connect().cascade(to: channel)
            submit(bytes, reply)
        }
    }

    private func write(_ bytes: ByteBuffer, _ reply: EventLoopPromise<RedisValue>, on channel: any Channel) {
        let timeout = config.timeout
        let timer = loop.scheduleTask(in: timeout.timeAmount) {
            self.wentDown("no reply within \(timeout)", channel: channel)
        }
        // The store's state changes before the caller hears: it sees a store
        // that is up once it has an answer, and down once it has a failure.
        let answer = loop.makePromise(of: RedisValue.self)
        answer.futureResult.whenComplete { result in
            timer.cancel()
            switch result {
            case .success(let value):
                // Up once it answers (connecting is not enough: TLS or AUTH may still fail).
                if !value.isError { self.answered(on: channel) }
                reply.succeed(value)
            case .failure(let error):
                let failure = error as? StoreFailure ?? StoreFailure(description: "\(error)")
                self.wentDown(failure.description, channel: channel)
                reply.fail(failure)
            }
        }
        channel.writeAndFlush(RedisConnectionHandler.Request(bytes: bytes, reply: answer)).whenFailure { answer.fail($0) }
    }

    private func connect() -> EventLoopFuture<any Channel> {
        let (config, tls) = (config, tls)
        let connected = ClientBootstrap(group: loop)
            .connectTimeout(config.timeout.timeAmount)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let tls {
                        // An address is verified against the certificate's IP names; only a name goes as SNI.
                        let name = config.host.isIPAddress ? nil : config.host
                        try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: tls, serverHostname: name))
                    }
                    try channel.pipeline.syncOperations.addHandler(RedisConnectionHandler())
                }
            }
            .connect(host: config.host, port: config.port)
        return connected.map { channel in
            // Sent first on the pipeline, before any command that needs them.
            var setup: [[String]] = []
            if let password = config.password { setup.append(["AUTH", password]) }
            if config.database != 0 { setup.append(["SELECT", String(config.database)]) }
            for command in setup {
                var bytes = ByteBuffer()
                RedisCommand.encode(command, into: &bytes)
                let reply = channel.eventLoop.makePromise(of: RedisValue.self)
                self.write(bytes, reply, on: channel)
                reply.futureResult.whenSuccess { value in
                    if case .error(let message) = value { self.wentDown("\(command[0]) refused: \(message)", channel: channel) }
                }
            }
            self.connected(channel)
            return channel
        }.flatMapErrorThrowing { error in
            self.wentDown("cannot connect to \(config.host):\(config.port): \(error)", channel: nil)
            throw StoreFailure(description: "cannot connect: \(error)")
        }
    }

    private func connected(_ channel: any Channel) {
        let closed = state.withLock { state in
            if !state.closed { state.connection = .connected(channel) }
            return state.closed
        }
        if closed { return channel.close(promise: nil) }
        channel.closeFuture.whenComplete { _ in self.wentDown("connection closed", channel: channel) }
    }

    private func answered(on channel: any Channel) {
        let changed = state.withLock { state in
            guard case .connected(let current) = state.connection, current === channel, state.health != .up else { return false }
            state.health = .up
            state.backoff = .milliseconds(100)
            return true
        }
        if changed {
            upGauge.record(1)
            logger.notice("store: connected to redis at \(config.host):\(config.port)")
        }
    }

    /// The store is down for the backoff; `channel` (if still the current one) is closed.
    private func wentDown(_ reason: String, channel: (any Channel)?) {
        let (changed, backoff) = state.withLock { state -> (Bool, Duration) in
            if state.closed { return (false, .zero) }
            if let channel {
                // A channel closed after another replaced it changes nothing.
                guard case .connected(let current) = state.connection, current === channel else { return (false, .zero) }
            }
            let backoff = state.backoff
            let until = NIODeadline.now() + backoff.timeAmount
            state.connection = .down(until: until)
            downUntil.store(until.uptimeNanoseconds, ordering: .relaxed)
            state.backoff = min(backoff * 2, .seconds(5))
            let wasDown = state.health.isDown
            state.health = .down(reason)
            return (!wasDown, backoff)
        }
        channel?.close(promise: nil)
        guard backoff > .zero else { return }
        loop.scheduleTask(in: backoff.timeAmount) { self.tryAgain() }
        failures.increment()
        if changed {
            upGauge.record(0)
            logger.warning("store: redis at \(config.host):\(config.port) is down (\(reason)); local behaviour until it is back, retrying after \(backoff)")
        }
    }
}

extension RedisClient {
    /// A backoff is over: tries again unless a call already has (the store is
    /// no longer down, or down for a later backoff) or `close()` ended the
    /// tries (down for good).
    private func tryAgain() {
        guard case .down(let until) = state.withLock({ $0.connection }), NIODeadline.now() >= until else { return }
        send(["PING"]).whenComplete { _ in }
    }
}

extension RedisClient.Health {
    var isDown: Bool { if case .down = self { true } else { false } }
}
