import NIOHTTP1
import Rewriter

extension HeaderList {
    /// NIO's headers as ours, names and order as they arrived, with room for
    /// the forwarding headers the gateway adds (no regrowth per call).
    init(_ headers: HTTPHeaders) {
        var fields: [Field] = []
        fields.reserveCapacity(headers.count + 8)
        for (name, value) in headers { fields.append(Field(name: name, value: value)) }
        self.init(fields)
    }

    var httpHeaders: HTTPHeaders { HTTPHeaders(map { ($0.name, $0.value) }) }
}

extension HTTPHeaders {
    /// Drops the hop-by-hop headers and every header `Connection` names.
    mutating func removeHopByHop() {
        // One pass to find what goes (usually just `Connection: keep-alive`):
        // which of the fixed names, as bits, and names a Connection lists (rare).
        var seen: UInt16 = 0
        var named: [String] = []
        for (name, value) in self where HeaderList.isHopByHop(name) {
            if let index = HeaderList.hopByHop.firstIndex(where: { HeaderList.equalNames($0, name) }) { seen |= 1 << index }
            // `Connection: keep-alive` / `close` (nearly every answer) names no header.
            guard HeaderList.equalNames(name, "Connection"), !HeaderList.equalNames(value, "keep-alive"),
                !HeaderList.equalNames(value, "close")
            else { continue }
            for token in HeaderList.connectionTokens(CollectionOfOne(value)) where token != "close" && token != "keep-alive" {
                named.append(String(token))
            }
        }
        for (index, name) in HeaderList.hopByHop.enumerated() where seen & (1 << index) != 0 { remove(name: name) }
        for name in named { remove(name: name) }
    }
}

extension HeaderRules {
    /// The same rules on NIO's headers (answers go back without conversion).
    func apply(to headers: inout HTTPHeaders) {
        for name in remove { headers.remove(name: name) }
        for field in self.set { headers.replaceOrAdd(name: field.name, value: field.value) }
        for field in add { headers.add(name: field.name, value: field.value) }
    }
}
