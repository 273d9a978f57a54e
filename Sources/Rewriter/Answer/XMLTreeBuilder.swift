/// The document by xmltodict's convention, built from element events: both
/// readers (libxml2's and the fast path's) feed it, so the convention lives
/// here once.
struct XMLTreeBuilder {
    /// One element being read.
    private struct Frame {
        var name: String
        /// Where this element is in `arrays` (nil: no forced path passes here).
        var node: XMLArrayPaths.Node?
        /// Where its attributes and children start in `members`.
        var start: Int
        var text = Text.none
    }

    /// An element's text so far: the first piece kept where it is when that memory outlives the build.
    private enum Text {
        case none
        case borrowed(UnsafeBufferPointer<UInt8>)
        case owned([UInt8])
    }

    let arrays: XMLArrayPaths
    let maxDepth: Int
    private var stack: [Frame] = []
    /// The open elements' attributes and children, each element's after its
    /// parent's: one array, so a closing child is appended in place rather
    /// than its parent's object moved out of the stack and back.
    private var members: [JSONObject.Member] = []
    private(set) var document: JSONValue?

    init(arrays: XMLArrayPaths, maxDepth: Int) {
        self.arrays = arrays
        self.maxDepth = maxDepth
        stack.reserveCapacity(min(maxDepth, 16))
        members.reserveCapacity(16)
    }

    var depth: Int { stack.count }

    /// An element starts (its attributes follow); a refusal's reason.
    mutating func open(_ name: String) -> String? {
        guard stack.count < maxDepth else { return "deeper than \(maxDepth) elements" }
        guard document == nil else { return "content after the root element" }
        let parent = stack.isEmpty ? XMLArrayPaths.root : stack[stack.count - 1].node
        stack.append(Frame(name: name, node: arrays.child(parent, name), start: members.count))
        return nil
    }

    mutating func attribute(_ key: String, _ value: String) {
        members.append(JSONObject.Member(key: "@" + key, value: .string(value)))
    }

    /// Text in memory that outlives the build (the scanner's answer): kept in place until a second piece comes.
    mutating func text(borrowing bytes: UnsafeBufferPointer<UInt8>) {
        guard let top = stack.indices.last else { return }
        guard case .none = stack[top].text else { return text(bytes) }
        stack[top].text = .borrowed(bytes)
    }

    /// Text copied (libxml2's is valid only until its next read).
    mutating func text(_ bytes: some Collection<UInt8>) {
        guard let top = stack.indices.last else { return }
        var owned: [UInt8]
        switch stack[top].text {
        case .none: owned = []
        case .borrowed(let first): owned = Array(first)
        case .owned(let pieces): owned = pieces
        }
        stack[top].text = .none
        owned.append(contentsOf: bytes)
        stack[top].text = .owned(owned)
    }

    /// The element on top is complete: its value goes to its parent (or is the document).
    mutating func close() {
        let frame = stack.removeLast()
        let text: String? = switch frame.text {
        case .none: nil
        case .borrowed(let bytes): Self.trimmed(bytes)
        case .owned(let bytes): bytes.withUnsafeBufferPointer(Self.trimmed)
        }
        let value: JSONValue
        if members.count > frame.start {
            if let text { members.append(JSONObject.Member(key: "#text", value: .string(text))) }
            value = .object(JSONObject(Array(members[frame.start...])))
            members.removeSubrange(frame.start...)
        } else {
            value = text.map(JSONValue.string) ?? .null
        }
        let forced = arrays.isForced(frame.node)
        guard !stack.isEmpty else {
            document = .object(JSONObject([JSONObject.Member(key: frame.name, value: forced ? .array([value]) : value)]))
            return
        }
        // Keys read in place (a closure over the members copied each one).
        var index = stack[stack.count - 1].start
        while index < members.count, members[index].key != frame.name { index += 1 }
        guard index < members.count else {
            members.append(JSONObject.Member(key: frame.name, value: forced ? .array([value]) : value))
            return
        }
        // A repeated sibling: the first becomes an array (taken out of the member first, so the append does not copy it).
        if case .array(var elements) = members[index].value {
            members[index].value = .null
            elements.append(value)
            members[index].value = .array(elements)
        } else {
            members[index].value = .array([members[index].value, value])
        }
    }

    /// Text with the XML whitespace around it dropped; nil when nothing is left.
    private static func trimmed(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        func space(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D }
        guard let first = bytes.firstIndex(where: { !space($0) }), let last = bytes.lastIndex(where: { !space($0) }) else { return nil }
        return String(decoding: bytes[first...last], as: UTF8.self)
    }
}

/// `xml.arrays` as a tree of element names, made once per rule: an element
/// finds its place from its parent's by name, without building its path.
public struct XMLArrayPaths: Sendable, Hashable {
    typealias Node = Int
    private struct Entry: Sendable, Hashable {
        var children: [(name: String, node: Int)] = []
        var forced = false
        static func == (a: Entry, b: Entry) -> Bool {
            a.forced == b.forced && a.children.elementsEqual(b.children) { $0.name == $1.name && $0.node == $1.node }
        }
        func hash(into hasher: inout Hasher) {
            hasher.combine(forced)
            for child in children { hasher.combine(child.name); hasher.combine(child.node) }
        }
    }

    static let root: Node? = 0
    private var entries = [Entry()]

    /// Paths from the root (`/Envelope/Body/User/Tag`); one that does not start with `/` names nothing.
    public init(_ paths: Set<String>) {
        for path in paths.sorted() where path.hasPrefix("/") {
            var node = 0
            for name in path.dropFirst().split(separator: "/", omittingEmptySubsequences: false) {
                if let next = entries[node].children.first(where: { $0.name == name })?.node {
                    node = next
                } else {
                    entries.append(Entry())
                    entries[node].children.append((String(name), entries.count - 1))
                    node = entries.count - 1
                }
            }
            entries[node].forced = true
        }
    }

    func child(_ node: Node?, _ name: String) -> Node? {
        guard let node else { return nil }
        for child in entries[node].children where child.name == name { return child.node }
        return nil
    }

    func isForced(_ node: Node?) -> Bool { node.map { entries[$0].forced } ?? false }
}
