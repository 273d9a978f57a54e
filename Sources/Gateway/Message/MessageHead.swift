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
        ConnectionOptions(fields: headers).keepsAlive(version: version)
    }

    /// Its fields, taken for the upstream request built from them: a list
    /// still shared with the head would be copied whole at its first edit.
    /// The head keeps them only when a Connection field is among them
    /// (`keepsAlive` reads it later).
    mutating func takeFields() -> HeaderList {
        var fields = HeaderList()
        swap(&fields, &headers)
        if fields.contains("Connection") { headers = fields }
        return fields
    }
}

/// A response's head, from an upstream or made by the gateway, on its way to the client.
struct ResponseHead: Equatable, Sendable {
    var version: HTTPVersion
    var status: HTTPResponseStatus
    /// Its fields as a list. A head read off an HTTP/1.1 upstream keeps
    /// them as bytes (`received`) until something reads them here or makes
    /// an edit `removeHopByHop` and `set` cannot keep beside the bytes.
    var headers: HeaderList {
        get { received?.list ?? fields }
        // In place: a get and a set would copy every field at each edit.
        _modify {
            if let received {
                fields = received.list
                self.received = nil
            }
            yield &fields
        }
    }
    private var fields: HeaderList
    private(set) var received: ReceivedFields?

    init(version: HTTPVersion, status: HTTPResponseStatus, headers: HeaderList) {
        self.version = version
        self.status = status
        fields = headers
    }

    init(version: HTTPVersion, status: HTTPResponseStatus, received: ReceivedFields) {
        self.version = version
        self.status = status
        fields = HeaderList()
        self.received = received
    }

    static func == (a: ResponseHead, b: ResponseHead) -> Bool {
        a.version == b.version && a.status == b.status && a.headers == b.headers
    }

    /// `HeaderList.removeHopByHop`, beside received bytes when it can be.
    mutating func removeHopByHop() {
        if received?.dropHopByHop() == true { return }
        headers.removeHopByHop()
    }

    /// `HeaderList.set`, beside received bytes when it can be.
    mutating func set(_ name: String, _ value: String) {
        if received?.set(name, value) == true { return }
        headers.set(name, value)
    }
}

typealias RequestPart = HTTPPart<RequestHead, ByteBuffer>
typealias ResponsePart = HTTPPart<ResponseHead, ByteBuffer>
