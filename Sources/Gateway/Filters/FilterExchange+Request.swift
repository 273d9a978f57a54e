import Rewriter

extension FilterExchange {
    /// The request that will go upstream, as filters see it: Envoy's
    /// pseudo-fields (`:method`, `:path`, `:authority`, `:scheme`) first,
    /// then its fields as they are.
    convenience init(request: UpstreamRequest, scheme: String, info: FilterCallInfo) {
        var fields: Fields = []
        fields.reserveCapacity(4 + request.headers.count)
        fields.append((":method", request.method))
        fields.append((":path", request.target))
        fields.append((":authority", request.headers["Host"] ?? ""))
        fields.append((":scheme", scheme))
        request.headers.withFields { headers in
            for i in headers.indices { fields.append((headers[i].name, headers[i].value)) }
        }
        self.init(requestHeaders: fields, requestBody: request.body ?? [], info: info)
    }

    /// The request as the filters left it, when one changed it: method,
    /// target and authority from the pseudo-fields, the other fields in their
    /// order, and a buffered body framed anew (its length recomputed).
    func apply(to request: inout UpstreamRequest, streams: Bool) {
        guard requestEdited else { return }
        var headers = HeaderList()
        headers.reserveCapacity(requestHeaders.count)
        // Read in place: a loop over the fields would copy each.
        requestHeaders.withUnsafeBufferPointer { fields in
            for i in fields.indices where fields[i].name.utf8.first != UInt8(ascii: ":") {
                let name = fields[i].name
                // Framing stays the gateway's, true to the bytes sent, whatever a filter did.
                if HeaderList.equalNames(name, "Content-Length") || HeaderList.equalNames(name, "Transfer-Encoding") { continue }
                headers.add(name, fields[i].value)
            }
        }
        if let authority = Self.value(":authority", in: requestHeaders), !authority.isEmpty { headers.set("Host", authority) }
        request.method = Self.value(":method", in: requestHeaders) ?? request.method
        request.target = Self.value(":path", in: requestHeaders) ?? request.target
        request.headers = headers
        guard !streams else { return }
        request.body = requestBody.isEmpty ? nil : requestBody
        request.frameBody()
    }
}

extension Problem {
    /// A filter failed (trap, fuel, memory cap, or a callback that could not
    /// run): the client learns which filter, the log why.
    static func filterFailed(_ filter: String, route: String) -> Problem {
        Problem(status: 500, code: "filter-failed", title: "A filter failed", detail: "filter \(filter) failed on this call", route: route)
    }
}
