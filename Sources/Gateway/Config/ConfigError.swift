/// One problem found in a config file, located by line, column and key path.
public struct ConfigIssue: Sendable, Hashable, CustomStringConvertible {
    public var file: String
    public var line: Int?
    public var column: Int?
    /// `routes[2].rewrite.path`
    public var path: String
    public var message: String

    public var description: String {
        let location = [file, line.map(String.init), column.map(String.init)].compactMap { $0 }.joined(separator: ":")
        return path.isEmpty ? "\(location): \(message)" : "\(location): \(path): \(message)"
    }
}

/// Every problem a config file has, not just the first.
public struct ConfigError: Error, Sendable, CustomStringConvertible {
    public var issues: [ConfigIssue]
    /// What was found besides the errors, shown with them: a fix need not be
    /// made twice to learn of a warning.
    public var warnings: [ConfigIssue] = []
    public var description: String { issues.map(\.description).joined(separator: "\n") }
}
