import NIOCore

/// `proxy_get_property`: Envoy's attribute names, for what gatewayd knows
/// of a call. Strings are their bytes, numbers 64-bit little-endian, maps
/// serialized as the ABI's maps.
extension FilterVM {
    /// A path's segments joined by dots (the guest sends them NUL-separated).
    static func propertyKey(_ path: [UInt8]) -> String {
        path.split(separator: 0, omittingEmptySubsequences: true).map { String(decoding: $0, as: UTF8.self) }.joined(separator: ".")
    }

    func property(_ path: [UInt8]) -> [UInt8]? {
        let key = Self.propertyKey(path)
        switch key {
        case "plugin_name": return Array(filter.name.utf8)
        case "plugin_root_id": return Array(filter.rootID.utf8)
        default: break
        }
        // A root context's callback (a tick, configure) reads no call's properties, as in Envoy: NotFound.
        guard let exchange else { return nil }
        if let set = exchange.setProperties[key] { return set }
        let info = exchange.info
        func text(_ value: String?) -> [UInt8]? { value.map { Array($0.utf8) } }
        func number(_ value: Int?) -> [UInt8]? {
            value.map { value in
                var bytes: [UInt8] = []
                ProxyWasm.append(UInt64(bitPattern: Int64(value)), to: &bytes)
                return bytes
            }
        }
        let request = exchange.request
        switch key {
        case "request.path": return text(request.target)
        case "request.url_path": return text(String(request.target.prefix { $0 != "?" }))
        case "request.host": return text(request.headers["Host"] ?? "")
        case "request.scheme": return text(exchange.scheme)
        case "request.method": return text(request.method)
        case "request.headers":
            return ProxyWasm.serialize(count: request.headers.count) { pair in
                request.headers.withFields { fields in
                    for i in fields.indices { pair(fields[i].name, fields[i].value) }
                }
            }
        case "request.id": return text(info.requestID)
        case "request.protocol": return text(info.proto)
        case "request.time": return number(Int(info.startNanos))
        // Envoy's: the client's address and port, as `destination.address` is (the address alone where the port is not known).
        case "source.address": return text(info.clientPort.map { SocketAddress.hostAndPort(info.clientAddress, $0) } ?? info.clientAddress)
        case "source.port": return number(info.clientPort)
        case "destination.address": return text(info.localAddress)
        case "destination.port": return number(info.localAddress.split(separator: ":").last.flatMap { Int($0) })
        case "connection.tls_version": return text(info.tlsVersion)
        case "route_name": return text(info.route)
        case "upstream.address": return text(info.upstreamAddress)
        case "response.code":
            return number(FilterExchange.value(":status", in: exchange.responseHeaders).flatMap { Int($0) } ?? info.responseCode)
        case "response.headers":
            return exchange.responseHeaders.isEmpty ? nil : ProxyWasm.serialize(exchange.responseHeaders.filter { !$0.name.hasPrefix(":") })
        default: return nil
        }
    }
}
