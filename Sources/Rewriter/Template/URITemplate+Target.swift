extension URITemplate {
    /// The template expanded into a request target that is safe to send: its
    /// path has no `.` or `..` segment (an upstream would resolve it, and
    /// `{+x}` could climb out of its base path), no `?` or `#` where the
    /// template puts none (a reserved expansion keeps them), and no repeated
    /// slashes (merged, as the client's path is). A value that would break
    /// one of these is refused, naming its parameter.
    public func expandTarget(lookup: (String) -> JSONValue?, text: @escaping (JSONValue) -> String?) throws(RewriteError) -> [UInt8] {
        var (bytes, pathEnd) = expandMarkingPath(lookup: lookup, text: text)
        let path = bytes[..<pathEnd]
        if path.contains(UInt8(ascii: "?")) || path.contains(UInt8(ascii: "#")) {
            let name = culprit(lookup: lookup, text: text) { $0.contains("?") || $0.contains("#") }
            throw RewriteError(.invalidParameter, key: name,
                               detail: "parameter '\(name ?? "?")' would put a '?' or '#' into the upstream path, which \(source) does not allow")
        }
        for segment in path.split(separator: UInt8(ascii: "/")) where PathSegment.dots(segment) > 0 {
            let name = culprit(lookup: lookup, text: text) { $0.contains(".") || $0.lowercased().contains("%2e") }
            throw RewriteError(.invalidParameter, key: name,
                               detail: "parameter '\(name ?? "?")' would make a '.' or '..' segment of the upstream path")
        }
        guard path.indices.contains(where: { $0 > path.startIndex && path[$0] == UInt8(ascii: "/") && path[$0 - 1] == UInt8(ascii: "/") }) else {
            return bytes
        }
        var merged: [UInt8] = []
        merged.reserveCapacity(pathEnd)
        for byte in path where byte != UInt8(ascii: "/") || merged.last != UInt8(ascii: "/") { merged.append(byte) }
        bytes.replaceSubrange(..<pathEnd, with: merged)
        return bytes
    }

    /// The first variable whose value's text `matches`: what a refusal names.
    private func culprit(lookup: (String) -> JSONValue?, text: (JSONValue) -> String?, _ matches: (String) -> Bool) -> String? {
        variableNames.first { name in
            switch lookup(name) {
            case .array(let elements): elements.contains { text($0).map(matches) ?? false }
            case .object(let object): object.members.contains { matches($0.key) || (text($0.value).map(matches) ?? false) }
            case let value?: text(value).map(matches) ?? false
            case nil: false
            }
        }
    }
}
