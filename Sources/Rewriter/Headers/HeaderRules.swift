/// Declarative header modifiers (`headers` / `response_headers` in the config):
/// `remove` first, then `set` (replace), then `add` (append).
public struct HeaderRules: Sendable, Hashable {
    public var set: [HeaderList.Field]
    public var add: [HeaderList.Field]
    public var remove: [String]

    public init(set: [HeaderList.Field] = [], add: [HeaderList.Field] = [], remove: [String] = []) {
        self.set = set
        self.add = add
        self.remove = remove
    }

    public var isEmpty: Bool { self.set.isEmpty && add.isEmpty && remove.isEmpty }

    public func apply(to headers: inout HeaderList) {
        for name in remove { headers.remove(name) }
        for field in self.set { headers.set(field.name, field.value) }
        for field in add { headers.add(field.name, field.value) }
    }
}
