import Foundation
import Testing
@testable import Gateway

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

    /// Every YAML shape docs/ shows loads as an operator would paste it: a
    /// whole config as it is; a top-level block (`tracing:`, `store:`) beside
    /// a listener; a route's block (`retry:`, `validate:`) inside a route.
    /// Upstreams a shape names but does not declare are declared for it, and
    /// every variable it reads is set. Relative files resolve in a folder
    /// holding what the shapes name: config/examples/filters/sign.wasm, and
    /// each `ca_file` as a CA certificate.
    @Test func everyYAMLShapeInTheDocsLoads() throws {
        let folder = Self.root.appendingPathComponent("docs")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("doc-shapes-\(getpid())")
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("filters"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try? FileManager.default.copyItem(at: Self.root.appendingPathComponent("config/examples/filters/sign.wasm"),
                                          to: directory.appendingPathComponent("filters/sign.wasm"))
        var shapes = 0
        for file in try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() where file.hasSuffix(".md") {
            let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
            for block in text.matches(of: /```yaml\n((?:.|\n)*?)```/) {
                shapes += 1
                let yaml = Self.loadable(String(block.output.1))
                var names = yaml.matches(of: /\$\{env:([A-Za-z_0-9]+)/).map { String($0.output.1) }
                for list in yaml.matches(of: /environment: \[([^\]]*)\]/) {
                    names += list.output.1.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                }
                let environment = Dictionary(names.map { ($0, "doc-value-long-enough-for-a-token") }) { a, _ in a }
                for file in yaml.matches(of: /ca_file: ([A-Za-z0-9_.-]+)/) {
                    try Self.certificate.write(to: directory.appendingPathComponent(String(file.output.1)), atomically: true, encoding: .utf8)
                }
                do {
                    let loaded = try ConfigLoader.load(yaml: yaml, file: directory.appendingPathComponent("doc.yaml").path, environment: environment)
                    #expect(!loaded.config.listeners.isEmpty)
                } catch {
                    Issue.record("\(file): a YAML block does not load:\n\(error)\n---\n\(yaml)")
                }
            }
        }
        #expect(shapes >= 6)
    }

    /// A docs block made a whole config, as the test above describes.
    static func loadable(_ block: String) -> String {
        var yaml = block
        let topKeys = Set(block.split(separator: "\n").compactMap { line -> String? in
            guard let first = line.first, first.isLetter else { return nil }
            return line.split(separator: ":").first.map(String.init)
        })
        if topKeys.isSubset(of: ["retry", "validate", "rewrite", "headers", "response_headers", "rate_limit", "match", "filters", "timeout"]) {
            let indented = block.split(separator: "\n", omittingEmptySubsequences: false).map { $0.isEmpty ? "" : "    " + $0 }.joined(separator: "\n")
            yaml = "routes:\n  - name: doc\n    upstream: legacy\n" + indented
        }
        if !yaml.contains("listeners:") { yaml = "listeners: [{address: 127.0.0.1:0}]\n" + yaml }
        let declared = Set(yaml.matches(of: /\n  ([a-z][a-z0-9_-]*):\s*(?:\{url|\n\s+(?:endpoints|url))/).map { String($0.output.1) })
        let named = Set(yaml.matches(of: /upstream: ([a-z][a-z0-9_-]*)/).map { String($0.output.1) }).subtracting(declared).subtracting(["echo"])
        if !named.isEmpty {
            let entries = named.sorted().map { "  \($0): {url: \"http://127.0.0.1:1\"}" }.joined(separator: "\n")
            if yaml.contains("\nupstreams:\n") {
                yaml = yaml.replacingOccurrences(of: "\nupstreams:\n", with: "\nupstreams:\n" + entries + "\n")
            } else {
                yaml += "\nupstreams:\n" + entries + "\n"
            }
        }
        return yaml
    }

    /// A self-signed CA certificate (no key): what a `ca_file` holds.
    static let certificate = """
        -----BEGIN CERTIFICATE-----
        MIIBeTCCAR+gAwIBAgIUCb2UEDhBG2z6XfNRKlJ+K9ms4YkwCgYIKoZIzj0EAwIw
        ETEPMA0GA1UEAwwGZG9jLWNhMCAXDTI2MTIwNTA2NDM0M1oYDzIxMjYxMTExMDY0
        MzQzWjARMQ8wDQYDVQQDDAZkb2MtY2EwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNC
        AATU+UnduF6F7RXs2TmMGzy2RlvTcseqCelGrEAz/jcgcy4Dg3tepTc2DTQdHEyP
        LES+dwyCyRjKKnL9Rz9V4Nvzo1MwUTAdBgNVHQ4EFgQU/f6Z70/WUX+67tMR2vJe
        kooR3dAwHwYDVR0jBBgwFoAU/f6Z70/WUX+67tMR2vJekooR3dAwDwYDVR0TAQH/
        BAUwAwEB/zAKBggqhkjOPQQDAgNIADBFAiEAzcn64Em+h7xwDWZiOr+yWlSaUXMy
        yVCG6gTPQ8mCN9QCIFcWEH8PUT5tX1a2fuq2/AeYYeHPu3iNdSoFP3yMRoj1
        -----END CERTIFICATE-----

        """
}
