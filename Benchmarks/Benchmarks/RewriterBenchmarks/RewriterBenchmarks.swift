import Benchmark
import Rewriter

/// A typical 1 KiB convenience object: 10 keys, one array, one nested object.
let body: [UInt8] = Array("""
    {"query":"swift nio gateway benchmarks","sort":"stars","order":"desc","page":3,"per_page":50,\
    "since":"2024-05-01T12:30:00Z","include_forks":false,\
    "tags":["server","networking","http","proxy","sidecar","legacy","rewriter","json"],\
    "owner":{"login":"gatewayd-team","type":"Organization","site_admin":false,"location":"Zürich, CH"},\
    "note":"A longer free-text value with spaces, punctuation (&=+%#) and unicode: café, naïve, 東京, 😀. \
    It exists to make the object about one kibibyte, as a realistic search or form payload would be, \
    so the numbers reflect escaping work and not just bookkeeping. Lorem ipsum dolor sit amet, consectetur \
    adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam."}
    """.utf8)

func request() -> IncomingRequest {
    IncomingRequest(method: "POST", target: "/search", contentType: "application/json", body: body)
}

/// scripts/bench.py's 2 KB SOAP GetUser answer (spyne's shape), for the answer side's decoder.
let soapAnswer: [UInt8] = Array(("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
    + "<soap11env:Envelope xmlns:soap11env=\"http://schemas.xmlsoap.org/soap/envelope/\" "
    + "xmlns:tns=\"urn:users\"><soap11env:Body><tns:GetUserResponse><tns:GetUserResult><tns:id>7</tns:id><tns:name>Ann</tns:name>"
    + "<tns:email>ann@example.com</tns:email><tns:active>true</tns:active><tns:tags>"
    + (0..<12).map { "<tns:string>tag-\($0)</tns:string>" }.joined()
    + "</tns:tags><tns:created>2024-05-01T12:30:00+00:00</tns:created><tns:bio>" + String(repeating: "legacy ", count: 180)
    + "</tns:bio></tns:GetUserResult></tns:GetUserResponse></soap11env:Body></soap11env:Envelope>").utf8)

let params = [ParamRule(name: "q", from: "query", required: true), ParamRule(name: "since", type: .timestampMs)]

let benchmarks: @Sendable () -> Void = {
    // Only wall clock and mallocs: sampling CPU time or throughput per iteration
    // would add the harness's own syscalls and allocations to every sample.
    Benchmark.defaultConfiguration = .init(metrics: [.wallClock, .mallocCountTotal],
                                           maxDuration: .seconds(3))

    let rules: [(String, Rule)] = [
        ("query", Rule(method: "GET", path: try! URITemplate("/v1/search{?q,sort,order}"), params: params)),
        ("form", Rule(encoding: .form, params: params)),
        ("json", Rule(encoding: .json, params: params)),
        ("multipart", Rule(encoding: .multipart, params: params)),
    ]
    for (name, rule) in rules {
        Benchmark("JSON 1 KiB -> \(name)") { benchmark in
            let incoming = request()
            for _ in benchmark.scaledIterations {
                blackHole(try! rule.apply(to: incoming, boundary: { "gatewayd-000000000000000000000000" }))
            }
        }
    }

    // MB/s = soapAnswer.count (2,099 bytes) / the wall clock per iteration; docs/benchmarks.md sets it beside xmllint --stream's.
    Benchmark("XML 2 KB SOAP decode (xmltodict convention)") { benchmark in
        let arrays: Set<String> = ["/Envelope/Body/GetUserResponse/GetUserResult/tags/string"]
        for _ in benchmark.scaledIterations {
            blackHole(try! XMLDecoder.decode(soapAnswer, namespaces: .strip, arrays: arrays))
        }
    }

    // scripts/bench.py's soap-json route: the answer to the client's 6-field object, no validator reading the document.
    let soapRule = AnswerRule(namespaces: .strip, arrays: ["/Envelope/Body/GetUserResponse/GetUserResult/tags/string"],
                              pick: JSONPointer("/Envelope/Body/GetUserResponse/GetUserResult"), fields: [
        AnswerField(name: "id", from: JSONPointer("/id")!, type: .int), AnswerField(name: "name", from: JSONPointer("/name")!),
        AnswerField(name: "email", from: JSONPointer("/email")!), AnswerField(name: "active", from: JSONPointer("/active")!, type: .bool),
        AnswerField(name: "tags", from: JSONPointer("/tags/string")!, array: true),
        AnswerField(name: "since", from: JSONPointer("/created")!, type: .timestampMs),
    ])
    Benchmark("XML 2 KB SOAP answer -> 6-field JSON") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(AnswerTranslator.translate(soapRule, contentType: "text/xml", body: soapAnswer, writesDocument: false))
        }
    }

    Benchmark("JSON 1 KiB parse only") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try! JSONReader.parse(body))
        }
    }
}
