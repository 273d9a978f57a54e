import NIOHTTP1
import Rewriter

extension HeaderList {
    /// NIO's headers as ours, names and order as they arrived.
    init(_ headers: HTTPHeaders) {
        self.init(headers.map { Field(name: $0.name, value: $0.value) })
    }

    var httpHeaders: HTTPHeaders { HTTPHeaders(map { ($0.name, $0.value) }) }
}
