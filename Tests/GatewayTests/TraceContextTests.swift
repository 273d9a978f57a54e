import Foundation
import Testing
@testable import Gateway

/// W3C Trace Context on the wire: a valid traceparent keeps its trace with a
/// new span for the gateway's hop, a missing one is started, a malformed one
/// is refused (replaced, its tracestate dropped); the trace id is logged and
/// named in problem responses.
@Suite(.ownThreads) struct TraceContextTests {
    static let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    static func parts(_ traceparent: String?) -> [String] { traceparent?.split(separator: "-").map(String.init) ?? [] }

    /// How each log format writes the trace id.
    static func logged(_ id: String, format: String) -> String { format == "json" ? #""trace_id":"\#(id)""# : "trace_id=\(id)" }

    @Test(arguments: [(true, "text"), (true, "json"), (false, "logfmt")])
    func traceparentIsKeptStartedOrRefused(start: Bool, format: String) async throws {
        let upstream = RecordingUpstream()
        let port = try await upstream.start()
        let gateway = try SpawnedGateway(yaml: """
            listeners: [{address: 127.0.0.1:0}]
            tracing: {propagate: true, start: \(start)}
            logging: {format: \(format)}
            upstreams: {app: {url: "http://127.0.0.1:\(port)"}}
            routes: [{name: app, match: {prefix: /app}, upstream: app}]
            """)
        // The upstream stops with the test's scope (Teardown), whether its checks throw or not.
        defer { gateway.stop() }
        _ = try curl(["-H", "traceparent: \(Self.parent)", "-H", "tracestate: congo=t61rcWkgMzE", "http://127.0.0.1:\(gateway.port)/app/kept"])
        _ = try curl(["http://127.0.0.1:\(gateway.port)/app/none"])
        _ = try curl(["-H", "traceparent: 00-xyz-01", "-H", "tracestate: congo=t61rcWkgMzE", "http://127.0.0.1:\(gateway.port)/app/bad"])
        // The access log is flushed every 100 ms.
        _ = await eventually(timeout: 3) { gateway.log.components(separatedBy: "outcome").count > 3 }
        let byPath = Dictionary(uniqueKeysWithValues: upstream.requests.map { ($0.uri, $0) })
        // Kept: the same trace and flags, this hop's own span id, tracestate as it came.
        let kept = Self.parts(byPath["/app/kept"]?.header("traceparent").first)
        #expect(kept.count == 4 && kept[0] == "00" && kept[1] == "4bf92f3577b34da6a3ce929d0e0e4736" && kept[3] == "01")
        #expect(kept.count == 4 && kept[2].count == 16 && kept[2] != "00f067aa0ba902b7")
        #expect(byPath["/app/kept"]?.header("tracestate") == ["congo=t61rcWkgMzE"])
        for path in ["/app/none", "/app/bad"] {
            let sent = byPath[path]?.header("traceparent") ?? []
            #expect(byPath[path]?.header("tracestate").isEmpty == true, "\(path)")
            if start {
                // Started here: a valid, new, sampled trace.
                let started = Self.parts(sent.first)
                #expect(started.count == 4 && started[1].count == 32 && started[1] != "4bf92f3577b34da6a3ce929d0e0e4736" && started[3] == "01")
                #expect(gateway.log.contains(Self.logged(started.count == 4 ? started[1] : "?", format: format)), "\(path)")
            } else {
                #expect(sent.isEmpty, "\(path): a malformed or missing traceparent is not forwarded")
            }
        }
        #expect(gateway.log.contains(Self.logged("4bf92f3577b34da6a3ce929d0e0e4736", format: format)))
        // A problem the gateway answers names the call's trace.
        let problem = try curl(["-H", "traceparent: \(Self.parent)", "http://127.0.0.1:\(gateway.port)/nowhere"]).text
        #expect(problem.contains(#""trace_id":"4bf92f3577b34da6a3ce929d0e0e4736""#))
    }
}
