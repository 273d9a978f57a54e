import Rewriter

/// One call as its filters see and edit it: the request that will go
/// upstream (read and edited in place, its pseudo-fields Envoy's), the
/// response's header maps, the bodies, what a filter answered in the
/// upstream's stead, and the call's properties. A call's chain of filters
/// (`FilterRun`) is its exchange: one object per call, not two.
class FilterExchange {
    typealias Fields = [(name: String, value: String)]

    /// The request as the filters leave it (edited through `edit`); its `:scheme` is `scheme`, the call's until a filter sets it.
    var request: UpstreamRequest
    var scheme: String
    var requestBody: [UInt8]
    /// A filter changed the body: the request is framed anew when handed back.
    var requestBodyEdited = false
    var requestTrailers: Fields = []
    var responseHeaders: Fields = []
    var responseBody: [UInt8] = []
    var responseTrailers: Fields = []
    /// A filter answered the client itself (`proxy_send_local_response`).
    var localResponse: LocalResponse?
    let info: any FilterCallInfo
    /// Properties the filters set (`proxy_set_property`), by path.
    var setProperties: [String: [UInt8]] = [:]
    /// What a filter asked of the stream in its last callback (continue,
    /// close, or an answer): read once the callback returned.
    var pending: Resumption?

    enum Resumption {
        case `continue`(ProxyWasm.StreamType)
        case close
        /// A filter answered in the upstream's stead.
        case answered
        /// A callback that should have continued it failed.
        case failed(FilterFailure)
    }

    /// A callback the chain did not start returned: what the filter asked goes to the chain.
    func deliverPending() {
        guard let resumption = pending ?? (localResponse != nil ? .answered : nil) else { return }
        pending = nil
        resumed(resumption)
    }

    /// What a paused filter asked, after a callback that did not come from
    /// the chain (an HTTP call's answer, a tick): the chain goes on from it.
    /// An exchange with no chain (a test's) has nothing to resume.
    func resumed(_ resumption: Resumption) {}

    struct LocalResponse {
        var status: Int
        var details: String
        var body: [UInt8]
        var headers: Fields
        let filter: String
    }

    /// Takes `request` over (the caller's is left empty until `handBack`),
    /// so that the filters' edits change it in place rather than a copy.
    init(taking request: inout UpstreamRequest, info: any FilterCallInfo) {
        var taken = UpstreamRequest(method: request.method, target: "", headers: HeaderList(), body: nil, framing: RequestFraming.none)
        swap(&taken, &request)
        requestBody = taken.body ?? []
        self.request = taken
        scheme = info.scheme
        self.info = info
    }

    /// The request as the filters left it, a body they changed framed anew
    /// (its length recomputed). The exchange keeps reading it: its
    /// properties serve the response's callbacks too.
    func handBack(to request: inout UpstreamRequest, streams: Bool) {
        request = self.request
        guard requestBodyEdited, !streams else { return }
        request.body = requestBody.isEmpty ? nil : requestBody
        request.frameBody()
    }

    /// A map a filter reads: the request's in place, the others as lists.
    func map(_ type: ProxyWasm.MapType) -> FieldMap? {
        switch type {
        case .requestHeaders: .request(self)
        case .requestTrailers: .fields(requestTrailers)
        case .responseHeaders: .fields(responseHeaders)
        case .responseTrailers: .fields(responseTrailers)
        default: nil
        }
    }

    /// Applies a filter's edit to a map the call carries; false for a map
    /// it does not, or an edit the request cannot take.
    func edit(_ type: ProxyWasm.MapType, _ edit: FieldEdit) -> Bool {
        switch type {
        case .requestHeaders: return editRequest(edit)
        case .requestTrailers: edit.apply(to: &requestTrailers)
        case .responseHeaders: edit.apply(to: &responseHeaders)
        case .responseTrailers: edit.apply(to: &responseTrailers)
        default: return false
        }
        return true
    }

    /// The first value of `name` (case-insensitive, as HTTP field names
    /// are), read in place: a loop over the fields would copy each.
    static func value(_ name: String, in fields: Fields) -> String? {
        fields.withUnsafeBufferPointer { fields in
            for i in fields.indices where HeaderList.equalNames(fields[i].name, name) { return fields[i].value }
            return nil
        }
    }
}

/// What a call's properties are read from (Envoy's attribute names): read
/// only when a filter asks for one, from the call as it is then.
protocol FilterCallInfo: AnyObject {
    var route: String { get }
    var upstream: String { get }
    var requestID: String { get }
    var clientAddress: String { get }
    var clientPort: Int? { get }
    /// `host:port` the client connected to.
    var localAddress: String { get }
    /// `TLSv1.3` and the like; nil on a cleartext connection.
    var tlsVersion: String? { get }
    var scheme: String { get }
    /// `HTTP/1.1`, `HTTP/2`.
    var proto: String { get }
    /// Nanoseconds since the Unix epoch when the request arrived.
    var startNanos: UInt64 { get }
    var upstreamAddress: String? { get }
    var responseCode: Int? { get }
}

/// A call's properties given as they are (an explanation's, a test's).
final class FixedCallInfo: FilterCallInfo, Sendable {
    let route: String
    let upstream: String
    let requestID: String
    let clientAddress: String
    let localAddress: String
    let scheme: String
    let proto: String
    let startNanos: UInt64
    var clientPort: Int? { nil }
    var tlsVersion: String? { nil }
    var upstreamAddress: String? { nil }
    var responseCode: Int? { nil }

    init(route: String, upstream: String, requestID: String, clientAddress: String, localAddress: String, scheme: String, proto: String,
         startNanos: UInt64) {
        self.route = route
        self.upstream = upstream
        self.requestID = requestID
        self.clientAddress = clientAddress
        self.localAddress = localAddress
        self.scheme = scheme
        self.proto = proto
        self.startNanos = startNanos
    }
}
