import Rewriter

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
    /// A filter changed the request (its fields or its body): it is rebuilt from them.
    var requestEdited = false
    /// Properties the filters set (`proxy_set_property`), by path.
    var setProperties: [String: [UInt8]] = [:]
    /// What a filter asked of the stream in its last callback (continue,
    /// close, or an answer): read once the callback returned.
    var pending: Resumption?
    /// The chain waits for a paused filter: told, after a callback that did
    /// not come from the chain (an HTTP call's answer, a tick), what it asked.
    var resume: ((Resumption) -> Void)?

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
        resume?(resumption)
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

    /// Edits a map the call carries in place (a copy would be copied again
    /// on its first edit); false for one it does not.
    func editFields(_ map: ProxyWasm.MapType, _ edit: (inout Fields) -> Void) -> Bool {
        switch map {
        case .requestHeaders:
            edit(&requestHeaders)
            requestEdited = true
        case .requestTrailers: edit(&requestTrailers)
        case .responseHeaders: edit(&responseHeaders)
        case .responseTrailers: edit(&responseTrailers)
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
    var tlsVersion: String? = nil
    var upstreamAddress: String? = nil
    var responseCode: Int? = nil
}
