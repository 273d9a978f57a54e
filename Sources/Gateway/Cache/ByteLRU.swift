/// Values kept by key up to a number of bytes, the least recently used
/// evicted first: a dictionary of nodes linked most recent first, so a
/// use, an insert and an eviction are O(1). Written here: the libraries on
/// the mirror have no LRU bounded by bytes.
struct ByteLRU<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private struct Node: Sendable {
        var value: Value
        var bytes: Int
        var newer: Key?
        var older: Key?
    }

    private var nodes: [Key: Node] = [:]
    private var newest: Key?
    private var oldest: Key?
    private(set) var bytes = 0
    var limit: Int

    init(limit: Int) { self.limit = limit }

    var count: Int { nodes.count }

    /// The value, now the most recently used.
    mutating func use(_ key: Key) -> Value? {
        guard let node = nodes[key] else { return nil }
        unlink(key, node)
        link(key, value: node.value, bytes: node.bytes)
        return node.value
    }

    func peek(_ key: Key) -> Value? { nodes[key]?.value }

    /// Keeps `value` as the most recently used; returns how many older ones
    /// were evicted to make room. A value larger than the limit is not kept.
    @discardableResult
    mutating func set(_ key: Key, _ value: Value, bytes size: Int) -> Int {
        remove(key)
        guard size <= limit else { return 0 }
        var evicted = 0
        while bytes + size > limit, let oldest {
            remove(oldest)
            evicted += 1
        }
        link(key, value: value, bytes: size)
        return evicted
    }

    @discardableResult
    mutating func remove(_ key: Key) -> Value? {
        guard let node = nodes[key] else { return nil }
        unlink(key, node)
        return node.value
    }

    /// Removes every value whose key `matches`; returns how many.
    @discardableResult
    mutating func removeAll(where matches: (Key) -> Bool) -> Int {
        let doomed = nodes.keys.filter(matches)
        for key in doomed { remove(key) }
        return doomed.count
    }

    /// Keeps at most `limit` bytes from now on; returns how many were evicted.
    mutating func shrink(to limit: Int) -> Int {
        self.limit = limit
        var evicted = 0
        while bytes > limit, let oldest {
            remove(oldest)
            evicted += 1
        }
        return evicted
    }

    /// Keys from the most recently used (tests, and the admin's listing).
    var keysByRecency: [Key] {
        var keys: [Key] = []
        var next = newest
        while let key = next {
            keys.append(key)
            next = nodes[key]?.older
        }
        return keys
    }

    private mutating func link(_ key: Key, value: Value, bytes size: Int) {
        nodes[key] = Node(value: value, bytes: size, newer: nil, older: newest)
        if let newest { nodes[newest]?.newer = key }
        newest = key
        if oldest == nil { oldest = key }
        bytes += size
    }

    private mutating func unlink(_ key: Key, _ node: Node) {
        nodes[key] = nil
        if let newer = node.newer { nodes[newer]?.older = node.older } else { newest = node.older }
        if let older = node.older { nodes[older]?.newer = node.newer } else { oldest = node.newer }
        bytes -= node.bytes
    }
}
