// Serves calls through a Swift request modifier and response validator,
// then checks what they did: run with no arguments, exits 0 when both worked.
import Foundation
import Gateway

/// Signs every request that goes upstream.
struct Sign: RequestModifier {
    func modify(_ request: inout UpstreamRequest, context: ModifierContext) async throws {
        request.headers.set("X-Signature", "signed:\(request.method) \(request.target)")
    }
}

/// Refuses answers the upstream marks as stale (a 502 names this validator).
struct RefuseStale: ResponseValidator {
    func validate(_ outcome: TryOutcome, route: String) -> ValidatorSpec.Action {
        guard case .response(_, let headers, _) = outcome, headers["X-Stale"] != nil else { return .next }
        return .fail
    }
}

/// One HTTP/1.1 exchange on a new connection; the whole answer.
func exchange(port: Int, _ request: String) throws -> String {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { throw POSIXError(.ECONNREFUSED) }
    _ = Array(request.utf8).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
    var answer: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while case let count = recv(fd, &buffer, buffer.count, 0), count > 0 { answer += buffer.prefix(count) }
    return String(decoding: answer, as: UTF8.self)
}

// The upstream: a second gateway answering with the built-in echo, one route marking its answers stale.
let upstream = GatewayServer(config: try ConfigLoader.load(yaml: """
    listeners: [{address: 127.0.0.1:0}]
    routes:
      - {name: stale, match: {prefix: /stale}, upstream: echo, response_headers: {set: {X-Stale: "1"}}}
      - {name: echo, upstream: echo}
    """).config)
let upstreamPort = try await upstream.start()[0].port!

let config = try ConfigLoader.load(yaml: """
    listeners: [{address: 127.0.0.1:0}]
    upstreams: {app: {url: "http://127.0.0.1:\(upstreamPort)"}}
    routes: [{name: app, upstream: app}]
    """).config
let server = GatewayServer(config: config, modifiers: [Sign()], validators: [RefuseStale()])
let port = try await server.start()[0].port!

let signed = try exchange(port: port, "GET /orders?id=7 HTTP/1.1\r\nHost: shop\r\nConnection: close\r\n\r\n")
let refused = try exchange(port: port, "GET /stale HTTP/1.1\r\nHost: shop\r\nConnection: close\r\n\r\n")
try await server.shutdown()
try await upstream.shutdown()

var failures: [String] = []
if !(signed.hasPrefix("HTTP/1.1 200 ") && signed.contains(#"["X-Signature","signed:GET /orders?id=7"]"#)) {
    failures.append("the modifier's header did not reach the upstream:\n\(signed)")
}
if !(refused.hasPrefix("HTTP/1.1 502 ") && refused.contains("validator-failed")) {
    failures.append("the validator did not refuse the stale answer:\n\(refused)")
}
if !failures.isEmpty {
    FileHandle.standardError.write(Data(failures.joined(separator: "\n").utf8))
    exit(1)
}
print("embedded gateway: the modifier signed the call, the validator refused the stale answer")
