/// One problem found in a config file, located by line, column and key path.
public struct ConfigIssue: Sendable, Hashable, CustomStringConvertible {
    /// The config file's path, as given.
    public var file: String
    /// The 1-based line, when the issue has a place.
    public var line: Int?
    /// The 1-based column, when the issue has a place.
    public var column: Int?
    /// `routes[2].rewrite.path`
    public var path: String
    /// What is wrong, and what would be right.
    public var message: String

    /// `file:line:column: path: message`, as `gatewayd check` prints it.
    public var description: String {
        let location = [file, line.map(String.init), column.map(String.init)].compactMap { $0 }.joined(separator: ":")
        return path.isEmpty ? "\(location): \(message)" : "\(location): \(path): \(message)"
    }
}

/// Every problem a config file has, not just the first.
public struct ConfigError: Error, Sendable, CustomStringConvertible {
    /// The errors, each with its place.
    public var issues: [ConfigIssue]
    /// What was found besides the errors, shown with them: a fix need not be
    /// made twice to learn of a warning.
    public var warnings: [ConfigIssue] = []
    /// Every issue on a line of its own.
    public var description: String { issues.map(\.description).joined(separator: "\n") }
}
