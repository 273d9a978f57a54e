/// The document by xmltodict's convention, built from element events: both
/// readers (libxml2's and the fast path's) feed it, so the convention lives
/// here once.
struct XMLTreeBuilder {
    /// One element being read: its attributes, children and text so far.
    private struct Frame {
        var name: String
        /// Where this element is in `arrays` (nil: no forced path passes here).
        var node: XMLArrayPaths.Node?
        var members = JSONObject()
        var hasContent = false
        /// The first piece is kept as a slice of the answer, copied only when a second comes.
        var text: ArraySlice<UInt8> = []
    }

    let arrays: XMLArrayPaths
    let maxDepth: Int
    private var stack: [Frame] = []
    private(set) var document: JSONValue?

    init(arrays: XMLArrayPaths, maxDepth: Int) {
        self.arrays = arrays
        self.maxDepth = maxDepth
        stack.reserveCapacity(min(maxDepth, 16))
    }

    var depth: Int { stack.count }

    /// An element starts (its attributes follow); a refusal's reason.
    mutating func open(_ name: String) -> String? {
        guard stack.count < maxDepth else { return "deeper than \(maxDepth) elements" }
        guard document == nil else { return "content after the root element" }
        stack.append(Frame(name: name, node: arrays.child(stack.isEmpty ? XMLArrayPaths.root : stack[stack.count - 1].node, name)))
        return nil
    }

    mutating func attribute(_ key: String, _ value: String) {
        stack[stack.count - 1].members.append("@" + key, .string(value))
        stack[stack.count - 1].hasContent = true
    }

    mutating func text(_ bytes: ArraySlice<UInt8>) {
        guard !stack.isEmpty else { return }
        if stack[stack.count - 1].text.isEmpty {
            stack[stack.count - 1].text = bytes
        } else {
            stack[stack.count - 1].text.append(contentsOf: bytes)
        }
    }

    /// The element on top is complete: its value goes to its parent (or is the document).
    mutating func close() {
        var frame = stack.removeLast()
        let text = Self.trimmed(frame.text)
        let value: JSONValue
        if frame.hasContent {
            if let text { frame.members.append("#text", .string(text)) }
            value = .object(frame.members)
        } else {
            value = text.map(JSONValue.string) ?? .null
        }
        let forced = arrays.isForced(frame.node)
        guard !stack.isEmpty else {
            var root = JSONObject()
            root.append(frame.name, forced ? .array([value]) : value)
            document = .object(root)
            return
        }
        stack[stack.count - 1].hasContent = true
        // Moved out and back: a copy left in the stack would make every append copy the members.
        var members = stack[stack.count - 1].members
        stack[stack.count - 1].members = JSONObject()
        if let index = members.index(forKey: frame.name) {
            if case .array(var elements) = members[index].value {
                members.setValue(.null, at: index)
                elements.append(value)
                members.setValue(.array(elements), at: index)
            } else {
                members.setValue(.array([members[index].value, value]), at: index)
            }
        } else {
            members.append(frame.name, forced ? .array([value]) : value)
        }
        stack[stack.count - 1].members = members
    }

    /// Text with the XML whitespace around it dropped; nil when nothing is left.
    private static func trimmed(_ bytes: ArraySlice<UInt8>) -> String? {
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
