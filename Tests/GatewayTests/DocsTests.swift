import Foundation
import Testing

/// The docs hold what the code accepts.
@Suite(.ownThreads) struct DocsTests {
    static let root = ExplainCommandTests.root

    /// Every key the config loader knows (its `known: [...]` lists) is in docs/configuration.md.
    @Test func everyConfigKeyIsDocumented() throws {
        let docs = try String(contentsOf: Self.root.appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        let folder = Self.root.appendingPathComponent("Sources/Gateway/Config")
        var keys: Set<String> = []
        for file in try FileManager.default.contentsOfDirectory(atPath: folder.path) where file.hasSuffix(".swift") {
            let source = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
            for list in source.matches(of: /known: \[([^\]]*)\]/) {
                for key in list.output.1.matches(of: /"([a-z_0-9]+)"/) { keys.insert(String(key.output.1)) }
            }
        }
        #expect(keys.count > 60, "the loader's key lists were not found")
        let missing = keys.filter { !docs.contains("\($0):") }.sorted()
        #expect(missing.isEmpty, "keys the loader accepts but docs/configuration.md does not show: \(missing)")
    }
}
