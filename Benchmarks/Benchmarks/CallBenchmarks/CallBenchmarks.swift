import Benchmark
import Foundation
import Gateway
import Logging
import Metrics
import NIOPosix
import Prometheus

// Allocations per call through gatewayd as operators run it: the default
// config (config/gatewayd.yaml, its listener and admin moved to port 0),
// one event loop, text logs with the access log on (to /dev/null here),
// Prometheus metrics, the built-in echo answering. The client is a blocking
// socket whose buffers are made before measuring, so every allocation
// counted is the gateway's. `swift package benchmark thresholds check`
// fails when a change adds one (Thresholds/, written by `thresholds update`).

/// One keep-alive HTTP/1.1 connection, read without allocating.
final class Connection: @unchecked Sendable {
    let fd: Int32
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    let request: [UInt8]

    init(port: Int, request: String) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        precondition(connected == 0, "the gateway did not accept")
        self.request = Array(request.utf8)
    }

    /// One call: the request out, its whole answer (a Content-Length body) in; the status code.
    func call() -> Int {
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        var filled = 0
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + filled, $0.count - filled, 0) }
            precondition(count > 0, "the gateway closed the connection")
            filled += count
            if let total = answerLength(filled), filled >= total { break }
        }
        return (Int(buffer[9]) - 48) * 100 + (Int(buffer[10]) - 48) * 10 + Int(buffer[11]) - 48
    }

    /// The answer's length once its head is in: the head plus Content-Length.
    private func answerLength(_ filled: Int) -> Int? {
        guard filled >= 4 else { return nil }
        var end = 0
        while end + 3 < filled, !(buffer[end] == 13 && buffer[end + 1] == 10 && buffer[end + 2] == 13 && buffer[end + 3] == 10) { end += 1 }
        guard end + 3 < filled else { return nil }
        let name = Array("\r\ncontent-length:".utf8)
        var i = 0
        while i + name.count < end {
            var matches = true
            for k in 0..<name.count where buffer[i + k] | (k > 1 ? 0x20 : 0) != name[k] { matches = false; break }
            if matches {
                var j = i + name.count, length = 0
                while buffer[j] == 32 { j += 1 }
                while buffer[j] >= 48, buffer[j] <= 57 { length = length * 10 + Int(buffer[j]) - 48; j += 1 }
                return end + 4 + length
            }
            i += 1
        }
        return end + 4
    }
}

/// One h2c connection (prior knowledge), a stream per call, frames built and read without allocating.
final class H2Connection: @unchecked Sendable {
    let connection: Connection
    var stream: UInt32 = 1
    var filled = 0
    var headers: [UInt8]

    init(port: Int, path: String) {
        // The preface, empty SETTINGS, and the connection's window opened as far as it goes.
        var hello = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + [0, 0, 0, 4, 0, 0, 0, 0, 0]
        hello += [0, 0, 4, 8, 0, 0, 0, 0, 0, 0x7F, 0xFF, 0, 0]
        let connection = Connection(port: port, request: "")
        self.connection = connection
        _ = hello.withUnsafeBytes { send(connection.fd, $0.baseAddress, $0.count, 0) }
        // GET, http, :path and :authority as literals without indexing (RFC 7541 6.2.2).
        let block: [UInt8] = [0x82, 0x86, 0x04, UInt8(path.utf8.count)] + Array(path.utf8) + [0x01, 5] + Array("bench".utf8)
        headers = [0, 0, UInt8(block.count), 1, 0x05, 0, 0, 0, 0] + block
    }

    /// One stream: HEADERS with END_STREAM out, frames in until the stream's END_STREAM; the frames read.
    func call() -> Int {
        headers[5] = UInt8(stream >> 24); headers[6] = UInt8(stream >> 16 & 0xFF); headers[7] = UInt8(stream >> 8 & 0xFF); headers[8] = UInt8(stream & 0xFF)
        _ = headers.withUnsafeBytes { send(connection.fd, $0.baseAddress, $0.count, 0) }
        var frames = 0
        while true {
            while filled >= 9 {
                let length = Int(connection.buffer[0]) << 16 | Int(connection.buffer[1]) << 8 | Int(connection.buffer[2])
                guard filled >= 9 + length else { break }
                let type = connection.buffer[3], flags = connection.buffer[4]
                let id = UInt32(connection.buffer[5] & 0x7F) << 24 | UInt32(connection.buffer[6]) << 16 | UInt32(connection.buffer[7]) << 8 | UInt32(connection.buffer[8])
                if type == 4, flags & 1 == 0 {
                    let ack: [UInt8] = [0, 0, 0, 4, 1, 0, 0, 0, 0]
                    _ = ack.withUnsafeBytes { send(connection.fd, $0.baseAddress, $0.count, 0) }
                }
                // Compacted in place: the frame's bytes leave the buffer's front.
                for k in 0..<(filled - 9 - length) { connection.buffer[k] = connection.buffer[k + 9 + length] }
                filled -= 9 + length
                frames += 1
                if id == stream, type == 0 || type == 1, flags & 1 == 1 {
                    stream += 2
                    return frames
                }
            }
            let count = connection.buffer.withUnsafeMutableBytes { recv(connection.fd, $0.baseAddress! + filled, $0.count - filled, 0) }
            precondition(count > 0, "the gateway closed the connection")
            filled += count
        }
    }
}

nonisolated(unsafe) var server: GatewayServer?
nonisolated(unsafe) var h2c: H2Connection?
nonisolated(unsafe) var group: MultiThreadedEventLoopGroup?
nonisolated(unsafe) var http1: Connection?

func start() async throws {
    let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../../config/gatewayd.yaml").path
    let yaml = try String(contentsOfFile: file, encoding: .utf8)
        .replacingOccurrences(of: "127.0.0.1:8080", with: "127.0.0.1:0").replacingOccurrences(of: "127.0.0.1:9901", with: "127.0.0.1:0")
    let config = try ConfigLoader.load(yaml: yaml, file: file).config
    // The daemon's text logs, here to /dev/null: the access log's lines are written, not shown.
    dup2(open("/dev/null", O_WRONLY), STDERR_FILENO)
    LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
    let factory = PrometheusMetricsFactory(registry: PrometheusCollectorRegistry())
    MetricsSystem.bootstrap(factory)
    let loops = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let gateway = GatewayServer(config: config, group: loops, logger: Logger(label: "gatewayd"), metrics: factory)
    let port = try await gateway.start()[0].port!
    (server, group) = (gateway, loops)
    http1 = Connection(port: port, request: "GET /search?keywords=swift+nio HTTP/1.1\r\nHost: bench\r\nUser-Agent: bench\r\n\r\n")
    // A few calls first: pools, caches and buffers reach their steady size.
    h2c = H2Connection(port: port, path: "/search?keywords=swift+nio")
    for _ in 0..<100 { precondition(http1!.call() == 200); _ = h2c!.call() }
}

let benchmarks: @Sendable () -> Void = {
    let calls: [(String, @Sendable () -> Int)] = [("http1-call-default-config", { http1!.call() }), ("h2c-stream-default-config", { h2c!.call() })]
    for (name, call) in calls {
        Benchmark(name,
                  configuration: .init(metrics: [.mallocCountTotal], maxDuration: .seconds(3), maxIterations: 20_000,
                                       thresholds: [.mallocCountTotal: .init(absolute: [.p50: 0, .p90: 0])]),
                  closure: { benchmark in
                      for _ in benchmark.scaledIterations { blackHole(call()) }
                  },
                  setup: { try await start() },
                  teardown: { try await server?.shutdown(); try await group?.shutdownGracefully() })
    }
}
