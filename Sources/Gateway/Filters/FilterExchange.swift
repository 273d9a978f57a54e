/// One call as its filters see and edit it: the request and response
/// header maps (with the pseudo-fields Envoy's carry), the bodies, what a
/// filter answered in the upstream's stead, and the call's properties.
final class FilterExchange {
    typealias Fields = [(name: String, value: String)]

    var requestHeaders: Fields
    var requestBody: [UInt8]
    var requestTrailers: Fields = []
    var responseHeaders: Fields = []
    var responseBody: [UInt8] = []
    var responseTrailers: Fields = []
    /// A filter answered the client itself (`proxy_send_local_response`).
    var localResponse: LocalResponse?
    let info: FilterCallInfo
    /// Properties the filters set (`proxy_set_property`), by path.
    var setProperties: [String: [UInt8]] = [:]
    /// The chain waits for a paused filter: told when it continues or closes the stream.
    var resume: ((Resumption) -> Void)?

    enum Resumption {
        case `continue`(ProxyWasm.StreamType)
        case close
        /// A callback that should have continued it failed.
        case failed(FilterFailure)
    }

    struct LocalResponse {
        var status: Int
        var details: String
        var body: [UInt8]
        var headers: Fields
        let filter: String
    }

    init(requestHeaders: Fields, requestBody: [UInt8], info: FilterCallInfo) {
        self.requestHeaders = requestHeaders
        self.requestBody = requestBody
        self.info = info
    }

    func fields(_ map: ProxyWasm.MapType) -> Fields? {
        switch map {
        case .requestHeaders: requestHeaders
        case .requestTrailers: requestTrailers
        case .responseHeaders: responseHeaders
        case .responseTrailers: responseTrailers
        default: nil
        }
    }

    /// Replaces a map the call carries; false for one it does not.
    func setFields(_ map: ProxyWasm.MapType, _ fields: Fields) -> Bool {
        switch map {
        case .requestHeaders: requestHeaders = fields
        case .requestTrailers: requestTrailers = fields
        case .responseHeaders: responseHeaders = fields
        case .responseTrailers: responseTrailers = fields
        default: return false
        }
        return true
    }

    /// The first value of `name` (case-insensitive, as HTTP field names are).
    static func value(_ name: String, in fields: Fields) -> String? {
        fields.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// What a call's properties are read from (Envoy's attribute names).
struct FilterCallInfo {
    var route: String
    var upstream: String
    var requestID: String
    var clientAddress: String
    var localAuthority: String
    var scheme: String
    /// `HTTP/1.1`, `HTTP/2`.
    var proto: String
    /// Nanoseconds since the Unix epoch when the request arrived.
    var startNanos: UInt64
    var tlsVersion: String?
    var upstreamAddress: String?
    var responseCode: Int?
}
