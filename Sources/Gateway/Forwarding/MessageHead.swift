import NIOCore
import NIOHTTP1
import Rewriter

/// A request's head as the gateway carries it from either protocol's
/// parser to the upstream: its fields in the one header type of the data
/// path (HeaderList, which the header benchmark chose over HTTPFields).
struct RequestHead: Equatable, Sendable {
    var method: HTTPMethod
    var uri: String
    var version: HTTPVersion
    var headers: HeaderList

    /// Whether the client keeps the connection after this request.
    var keepsAlive: Bool {
        var options = ConnectionOptions()
        headers.forEachValue(named: "Connection") { options.read($0) }
        return options.keepsAlive(version: version)
    }
}

/// A response's head, from an upstream or made by the gateway, on its way to the client.
struct ResponseHead: Equatable, Sendable {
    var version: HTTPVersion
    var status: HTTPResponseStatus
    var headers: HeaderList
}

typealias RequestPart = HTTPPart<RequestHead, ByteBuffer>
typealias ResponsePart = HTTPPart<ResponseHead, ByteBuffer>
