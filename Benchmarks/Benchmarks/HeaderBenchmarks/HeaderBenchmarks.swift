import Benchmark
import HTTPTypes
import NIOHTTP1
import Rewriter

// One call's header work in the gateway, on each candidate type: build the
// request's fields from the parsed head, drop hop-by-hop fields, read the
// ones routing and framing need, add the forwarding fields, write them out.
// It decides which header type the data path carries end to end.

let parsed: [(String, String)] = [
    ("Host", "api.example.com"), ("User-Agent", "curl/7.88.1"), ("Accept", "application/json"),
    ("Accept-Encoding", "gzip, deflate, br"), ("Accept-Language", "en-US,en;q=0.9"), ("Connection", "keep-alive"),
    ("Content-Type", "application/json"), ("Content-Length", "1024"), ("Cookie", "session=4f1c2a9e0b7d; theme=dark"),
    ("Authorization", "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"),
    ("X-Correlation-Id", "7f0c1d2e-3b4a-5968-7a8b-9c0d1e2f3a4b"), ("Cache-Control", "no-cache"),
]
let hopByHop = ["Connection", "Keep-Alive", "Proxy-Connection", "TE", "Upgrade", "Transfer-Encoding"]

func written(_ fields: some Sequence<(String, String)>) -> Int {
    var out: [UInt8] = []
    out.reserveCapacity(1024)
    for (name, value) in fields {
        out.append(contentsOf: name.utf8)
        out.append(contentsOf: ": ".utf8)
        out.append(contentsOf: value.utf8)
        out.append(contentsOf: "\r\n".utf8)
    }
    return out.count
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(metrics: [.wallClock, .mallocCountTotal], maxDuration: .seconds(3))

    Benchmark("headers per call: HeaderList") { benchmark in
        for _ in benchmark.scaledIterations {
            var headers = HeaderList(parsed.map { HeaderList.Field(name: $0.0, value: $0.1) })
            for name in hopByHop { headers.remove(name) }
            blackHole((headers["Host"], headers["Content-Type"], headers["Content-Length"], headers["X-Request-Id"]))
            headers.add("X-Forwarded-For", "203.0.113.7")
            headers.add("X-Forwarded-Proto", "http")
            headers.add("X-Forwarded-Host", "api.example.com")
            headers.add("X-Request-Id", "0af7651916cd43dd8448eb211c80319c")
            headers.set("User-Agent", "gatewayd")
            blackHole(written(headers.lazy.map { ($0.name, $0.value) }))
        }
    }

    Benchmark("headers per call: HTTPFields") { benchmark in
        let forwardedFor = HTTPField.Name("X-Forwarded-For")!, forwardedProto = HTTPField.Name("X-Forwarded-Proto")!
        let forwardedHost = HTTPField.Name("X-Forwarded-Host")!, requestID = HTTPField.Name("X-Request-Id")!
        // HTTPTypes keeps Host as the request's authority; a proxy reading HTTP/1.1 still meets it as a field.
        let host = HTTPField.Name("Host")!
        let names = hopByHop.map { HTTPField.Name($0)! }
        for _ in benchmark.scaledIterations {
            // Names from the wire are checked and lowercased as the parser hands them over.
            var headers = HTTPFields(parsed.map { HTTPField(name: HTTPField.Name($0.0)!, value: $0.1) })
            for name in names { headers[name] = nil }
            blackHole((headers[host], headers[.contentType], headers[.contentLength], headers[requestID]))
            headers.append(HTTPField(name: forwardedFor, value: "203.0.113.7"))
            headers.append(HTTPField(name: forwardedProto, value: "http"))
            headers.append(HTTPField(name: forwardedHost, value: "api.example.com"))
            headers.append(HTTPField(name: requestID, value: "0af7651916cd43dd8448eb211c80319c"))
            headers[.userAgent] = "gatewayd"
            blackHole(written(headers.lazy.map { ($0.name.rawName, $0.value) }))
        }
    }

    Benchmark("headers per call: NIO HTTPHeaders") { benchmark in
        for _ in benchmark.scaledIterations {
            var headers = HTTPHeaders(parsed)
            for name in hopByHop { headers.remove(name: name) }
            blackHole((headers.first(name: "Host"), headers.first(name: "Content-Type"), headers.first(name: "Content-Length"),
                       headers.first(name: "X-Request-Id")))
            headers.add(name: "X-Forwarded-For", value: "203.0.113.7")
            headers.add(name: "X-Forwarded-Proto", value: "http")
            headers.add(name: "X-Forwarded-Host", value: "api.example.com")
            headers.add(name: "X-Request-Id", value: "0af7651916cd43dd8448eb211c80319c")
            headers.replaceOrAdd(name: "User-Agent", value: "gatewayd")
            blackHole(written(headers.lazy.map { ($0.name, $0.value) }))
        }
    }
}
