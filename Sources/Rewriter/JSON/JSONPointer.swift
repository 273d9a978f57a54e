/// An RFC 6901 JSON pointer: `""` is the whole document, `/a/0/b~1c` walks
/// keys and array indices (`~1` is `/`, `~0` is `~`).
public struct JSONPointer: Sendable, Hashable, CustomStringConvertible {
    public let tokens: [String]
    public let description: String

    public init?(_ text: String) {
        guard text.isEmpty || text.hasPrefix("/") else { return nil }
        var tokens: [String] = []
        for raw in text.split(separator: "/", omittingEmptySubsequences: false).dropFirst() {
            var token = ""
            var iterator = raw.makeIterator()
            while let c = iterator.next() {
                guard c == "~" else { token.append(c); continue }
                switch iterator.next() {
                case "0": token.append("~")
                case "1": token.append("/")
                default: return nil
                }
            }
            tokens.append(token)
        }
        self.tokens = tokens
        self.description = text
    }

    public func resolve(in value: JSONValue) -> JSONValue? {
        var current = value
        for token in tokens {
            switch current {
            case .object(let object):
                guard let next = object[token] else { return nil }
                current = next
            case .array(let elements):
                guard let index = Int(token), index >= 0, index < elements.count,
                    token == "0" || !token.hasPrefix("0")
                else { return nil }
                current = elements[index]
            default:
                return nil
            }
        }
        return current
    }
}
