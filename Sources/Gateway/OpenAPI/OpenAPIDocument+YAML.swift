import Rewriter
import Yams

extension OpenAPIDocument {
    /// The document as YAML (Yams' emitter), keys in the JSON's order; a
    /// string that would read back as anything else is quoted.
    package static func yaml(_ config: GatewayConfig, file: String) throws -> String {
        try Yams.serialize(node: node(make(config, file: file)), width: -1)
    }

    static func node(_ value: JSONValue) -> Node {
        switch value {
        case .null: Node.scalar(.init("null", .implicit, .plain))
        case .bool(let flag): Node.scalar(.init(flag ? "true" : "false", .implicit, .plain))
        case .number(let spelling): Node.scalar(.init(spelling, .implicit, .plain))
        case .string(let text): Node.scalar(.init(text, .implicit, isPlain(text) ? .plain : .doubleQuoted))
        case .array(let items): Node.sequence(.init(items.map(node)))
        case .object(let object): Node.mapping(.init(object.map { (node(.string($0.key)), node($0.value)) }))
        }
    }

    /// Whether `text` reads back as the same string when written plain:
    /// letters, digits and `/ . _ - { } $ #` only, starting with no sign or
    /// indicator, no number (`200` is quoted, `3.1.0` is not), and no word
    /// YAML reads as a boolean or null.
    static func isPlain(_ text: String) -> Bool {
        guard let first = text.unicodeScalars.first, !"-+.#{}".unicodeScalars.contains(first), Double(text) == nil else { return false }
        guard !["true", "false", "null", "yes", "no", "on", "off", "y", "n", "~"].contains(text.lowercased()) else { return false }
        return text.unicodeScalars.allSatisfy { $0.properties.isAlphabetic || ("0"..."9").contains($0) || "/._-{}$#".unicodeScalars.contains($0) }
    }
}
