import Glibc
import Rewriter

/// The request map read and edited in place: Envoy's pseudo-fields are the
/// request's method, target, `Host` and the scheme; the framing fields stay
/// the gateway's, true to the bytes sent, whatever a filter writes.
extension FilterExchange {
    static let pseudoFieldCount = 4

    /// The first value of `name` (UTF-8 bytes; pseudo-fields by their exact names).
    func requestValue(named name: UnsafeRawBufferPointer) -> String? {
        guard name.first == UInt8(ascii: ":") else { return request.headers.firstIndex(named: name).map { request.headers[$0].value } }
        if Self.equal(name, ":method") { return request.method }
        if Self.equal(name, ":path") { return request.target }
        if Self.equal(name, ":authority") { return request.headers["Host"] ?? "" }
        if Self.equal(name, ":scheme") { return scheme }
        return nil
    }

    private static func equal(_ bytes: UnsafeRawBufferPointer, _ name: StaticString) -> Bool {
        bytes.count == name.utf8CodeUnitCount && memcmp(bytes.baseAddress!, name.utf8Start, bytes.count) == 0
    }

    /// Each field in map order, read in place: `:method`, `:path`,
    /// `:authority`, `:scheme`, then the request's fields.
    func forEachRequestField(_ body: (String, String) -> Void) {
        body(":method", request.method)
        body(":path", request.target)
        body(":authority", request.headers["Host"] ?? "")
        body(":scheme", scheme)
        request.headers.withFields { fields in
            for i in fields.indices { body(fields[i].name, fields[i].value) }
        }
    }

    /// False for an edit the request cannot take: a pseudo-field removed or unknown.
    func editRequest(_ edit: FieldEdit) -> Bool {
        switch edit {
        case .add(let name, let value), .replace(let name, let value):
            if name.utf8.first == UInt8(ascii: ":") { return setPseudoField(name, value) }
            guard !Self.isFraming(name) else { return true }
            let name = FieldEdit.lowercase(name)
            if case .add = edit { request.headers.add(name, value) } else { request.headers.set(name, value) }
            return true
        case .remove(let name):
            guard name.utf8.first != UInt8(ascii: ":") else { return false }
            // SDK body examples remove content-length before changing the body: the host frames it.
            request.headers.remove(name)
            return true
        case .replaceAll(let pairs):
            return replaceRequestFields(with: pairs)
        }
    }

    private func setPseudoField(_ name: String, _ value: String) -> Bool {
        switch name {
        case ":method": request.method = value
        case ":path": request.target = value
        case ":authority": request.headers.set("Host", value)
        case ":scheme": scheme = value
        default: return false
        }
        return true
    }

    /// The pairs become the request's fields in their order; a pseudo-field
    /// they leave out (and `Host`, when they name no authority) keeps its value.
    private func replaceRequestFields(with pairs: Fields) -> Bool {
        var headers = HeaderList()
        headers.reserveCapacity(pairs.count)
        var pseudo: Fields = []
        for (name, value) in pairs {
            if name.utf8.first == UInt8(ascii: ":") {
                guard [":method", ":path", ":authority", ":scheme"].contains(name) else { return false }
                pseudo.append((name, value))
            } else if !Self.isFraming(name) {
                headers.add(name, value)
            }
        }
        if !headers.contains("Host"), let host = request.headers["Host"] { headers.add("Host", host) }
        request.headers.withFields { fields in
            for field in fields where Self.isFraming(field.name) { headers.add(field.name, field.value) }
        }
        request.headers = headers
        for (name, value) in pseudo { _ = setPseudoField(name, value) }
        return true
    }

    /// The fields that frame a message on its connection: the host's, true
    /// to the bytes it sends, whatever a filter writes (Envoy's codec
    /// recomputes them the same way).
    static func isFraming(_ name: String) -> Bool {
        HeaderList.equalNames(name, "Content-Length") || HeaderList.equalNames(name, "Transfer-Encoding")
            || HeaderList.equalNames(name, "Connection")
    }
}

extension Problem {
    /// A filter failed (trap, fuel, memory cap, or a callback that could not
    /// run): the client learns which filter, the log why.
    static func filterFailed(_ filter: String, route: String) -> Problem {
        Problem(status: 500, code: "filter-failed", title: "A filter failed", detail: "filter \(filter) failed on this call", route: route)
    }
}
