/// Reads a query string or form body into parameters: keys are taken as
/// written (no bracket interpretation), a key seen once is a string, a repeated
/// key becomes an array at its first position, a key without `=` is "".
public enum QueryDecoder {
    public static func decode(_ bytes: some Collection<UInt8>) throws(RewriteError) -> JSONObject {
        var object = JSONObject()
        for pair in bytes.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let equals = pair.firstIndex(of: UInt8(ascii: "="))
            let rawKey = equals.map { pair[pair.startIndex..<$0] } ?? pair[...]
            let rawValue = equals.map { pair[pair.index(after: $0)...] } ?? pair[pair.endIndex...]
            guard let key = PercentEncoding.decode(rawKey, plusAsSpace: true),
                let value = PercentEncoding.decode(rawValue, plusAsSpace: true)
            else {
                throw RewriteError(.invalidQuery, detail: "the query string or form body is not valid UTF-8 once percent-decoded")
            }
            if let i = object.index(forKey: key) {
                switch object[i].value {
                case .array(var list):
                    list.append(.string(value))
                    object.setValue(.array(list), at: i)
                case let first:
                    object.setValue(.array([first, .string(value)]), at: i)
                }
            } else {
                object.append(key, .string(value))
            }
        }
        return object
    }

    public static func decode(_ string: String) throws(RewriteError) -> JSONObject {
        try decode(Array(string.utf8))
    }
}
