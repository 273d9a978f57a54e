/// An RFC 9457 problem details document: every error the gateway answers
/// itself is one of these, served as `application/problem+json`.
public struct Problem: Error, Sendable, Hashable {
    public var status: Int
    /// Short, stable, low-cardinality name; also the last part of `type`.
    public var code: String
    public var title: String
    public var detail: String
    public var route: String?
    /// The call's W3C trace id, when the gateway traces calls.
    public var traceID: String?
    /// Why, as the operator's access line gives it (config keys, limits):
    /// never sent to the client.
    public var logDetail: String?

    public init(status: Int, code: String, title: String, detail: String, route: String? = nil) {
        self.status = status
        self.code = code
        self.title = title
        self.detail = detail
        self.route = route
    }

    public static let contentType = "application/problem+json"

    public var type: String { "urn:gatewayd:problem:\(code)" }

    public var json: [UInt8] {
        var object = JSONObject()
        object.append("type", .string(type))
        object.append("title", .string(title))
        object.append("status", .number(String(status)))
        object.append("detail", .string(detail))
        if let route { object.append("route", .string(route)) }
        if let traceID { object.append("trace_id", .string(traceID)) }
        return JSONWriter.bytes(.object(object))
    }
}
