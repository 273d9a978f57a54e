import Rewriter

/// A header map as a filter reads it: the call's request in place (its
/// pseudo-fields first), or a list of fields.
enum FieldMap {
    case request(FilterExchange)
    case fields(FilterExchange.Fields)

    var count: Int {
        switch self {
        case .request(let exchange): FilterExchange.pseudoFieldCount + exchange.request.headers.count
        case .fields(let fields): fields.count
        }
    }

    /// The first value of `name` (UTF-8 bytes, read in place from the guest), case-insensitively.
    func value(named name: UnsafeRawBufferPointer) -> String? {
        switch self {
        case .request(let exchange):
            return exchange.requestValue(named: name)
        case .fields(let fields):
            return fields.withUnsafeBufferPointer { fields in
                for i in fields.indices where HeaderList.equalNames(fields[i].name, name) { return fields[i].value }
                return nil
            }
        }
    }

    /// The map as the ABI serializes it.
    var serialized: [UInt8] {
        switch self {
        case .request(let exchange): ProxyWasm.serialize(count: count, exchange.forEachRequestField)
        case .fields(let fields): ProxyWasm.serialize(fields)
        }
    }
}

/// A filter's edit of a header map, its names and values already checked
/// (`FilterVM.isWritable`).
enum FieldEdit {
    case add(name: String, value: String)
    /// The first field of the name takes the value; the others go.
    case replace(name: String, value: String)
    case remove(name: String)
    /// The whole map.
    case replaceAll(FilterExchange.Fields)

    /// A name as Envoy's maps hold it; most already are lowercase, and are kept as they are.
    static func lowercase(_ name: String) -> String {
        var name = name
        return name.withUTF8 { $0.contains { $0 &- 0x41 < 26 } } ? name.lowercased() : name
    }

    func apply(to fields: inout FilterExchange.Fields) {
        switch self {
        case .add(let name, let value):
            fields.append((Self.lowercase(name), value))
        case .replace(let name, let value):
            guard let index = fields.firstIndex(where: { HeaderList.equalNames($0.name, name) }) else { return fields.append((Self.lowercase(name), value)) }
            fields[index].value = value
            var position = fields.count - 1
            while position > index {
                if HeaderList.equalNames(fields[position].name, name) { fields.remove(at: position) }
                position -= 1
            }
        case .remove(let name):
            fields.removeAll { HeaderList.equalNames($0.name, name) }
        case .replaceAll(let pairs):
            fields = pairs
        }
    }
}
