import Foundation
import Testing

/// The library's public surface is an embedder's: every public declaration
/// of Sources/Gateway says what it is in a doc comment (DocC shows nothing
/// else), and what only `gatewayd` uses stays `package`.
@Suite struct PublicSurfaceTests {
    /// Sources/Gateway's files (path, text), read once for every test here.
    static let files: [(path: String, text: String)] = {
        let root = LayeringTests.sources
        let paths = (FileManager.default.enumerator(atPath: root.path)?.allObjects as? [String] ?? []).filter { $0.hasSuffix(".swift") }
        return paths.sorted().map { ($0, (try? String(contentsOf: root.appendingPathComponent($0), encoding: .utf8)) ?? "") }
    }()

    /// `file:line: declaration` for each public declaration (extensions and
    /// imports aside) whose line before, attributes skipped, is no `///`.
    static func undocumented() -> [String] {
        var found: [String] = []
        for (path, text) in files {
            let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
            for (index, line) in lines.enumerated() {
                var text = line.drop { $0 == " " }
                while text.hasPrefix("@"), let space = text.firstIndex(of: " ") { text = text[text.index(after: space)...] }
                let open = ["open class ", "open func ", "open var "].contains { text.hasPrefix($0) }
                guard text.hasPrefix("public ") || open, !text.hasPrefix("public extension"), !text.hasPrefix("public import") else { continue }
                var before = index - 1
                while before >= 0, lines[before].drop(while: { $0 == " " }).hasPrefix("@") { before -= 1 }
                if before >= 0, lines[before].drop(while: { $0 == " " }).hasPrefix("///") { continue }
                found.append("\(path):\(index + 1): \(text.prefix(80))")
            }
        }
        return found
    }

    @Test func everyPublicDeclarationSaysWhatItIs() {
        let missing = Self.undocumented()
        #expect(missing.isEmpty, "public without a doc comment:\n\(missing.joined(separator: "\n"))")
    }

    /// Types gatewayd needs and an embedder does not: `package`, so a change to them breaks no embedder.
    @Test(arguments: ["AdminServer", "RedisClient", "RetryState", "HTTPDate", "RouteTable", "Router", "Explanation",
                      "StructuredLogHandler", "OpenAPIDocument", "RouteStateRegistry"])
    func whatOnlyTheDaemonUsesIsNotPublic(_ type: String) {
        var declared = false
        for (path, text) in Self.files {
            if text.contains("public final class \(type)") || text.contains("public struct \(type)") || text.contains("public enum \(type)") {
                Issue.record("\(type) is public in \(path)")
            }
            if text.contains("package final class \(type)") || text.contains("package struct \(type)") || text.contains("package enum \(type)") {
                declared = true
            }
        }
        #expect(declared, "\(type) is no longer declared package")
    }
}
