/// The known name a misspelt one was most likely meant to be, for `check`'s
/// messages (`max_conections`: did you mean max_connections?).
enum NearestName {
    /// The closest of `names` by edit distance, when it is close enough to be
    /// a typo: at most 2 edits, and fewer than half the name's length.
    static func closest(to name: String, in names: [String]) -> String? {
        let lowered = Array(name.lowercased().utf8)
        var best: (name: String, distance: Int)?
        for candidate in names {
            let distance = editDistance(lowered, Array(candidate.lowercased().utf8))
            if distance < (best?.distance ?? .max) { best = (candidate, distance) }
        }
        guard let best, best.distance > 0 || name != best.name, best.distance <= 2, best.distance * 2 < lowered.count else { return nil }
        return best.name
    }

    /// Damerau-Levenshtein (adjacent swaps count one edit), on bytes.
    static func editDistance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        if a.isEmpty || b.isEmpty { return max(a.count, b.count) }
        var previous2 = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] { current[j] = min(current[j], previous2[j - 2] + 1) }
            }
            (previous2, previous, current) = (previous, current, previous2)
        }
        return previous[b.count]
    }
}
