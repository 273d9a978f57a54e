import NIOHTTP1
import Rewriter

/// swift-nio-http2's HTTP/1 client codec (the HTTP/2 upstream leg) speaks
/// NIO's HTTPHeaders: converted at that boundary only.
extension HeaderList {
    init(_ headers: HTTPHeaders) {
        var fields: [Field] = []
        fields.reserveCapacity(headers.count + 8)
        for (name, value) in headers { fields.append(Field(name: name, value: value)) }
        self.init(fields)
    }

    var httpHeaders: HTTPHeaders { HTTPHeaders(map { ($0.name, $0.value) }) }
}
