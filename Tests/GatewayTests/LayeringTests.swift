import Foundation
import Testing

/// The directions docs/layout.md allows between the folders of
/// Sources/Gateway, read from the sources: a type declared at the top level
/// of one folder, named in the code (not the comments) of a folder that may
/// not know it, is a new arrow the wrong way.
@Suite struct LayeringTests {
    /// Folders that may not name any type of the folders listed.
    static let forbidden: [(from: [String], to: [String], why: String)] = [
        (["Upstream", "HTTP1/Client", "HTTP2/Client", "Message", "Config", "Store", "Routing", "Metrics", "Logging", "Retry", "Tracing",
          "OpenAPI", "Cache"], ["Call"], "only the client side and the filters know the call"),
        (["Cache"], ["Listener", "HTTP1/Server", "HTTP2/Server", "Upstream", "Filters"], "the cache keeps answers and knows no connection"),
        (["Upstream", "HTTP1/Client", "HTTP2/Client", "Message"], ["Listener", "HTTP1/Server", "Admin"],
         "the upstream side knows nothing of the listeners"),
        (["Message"], ["Upstream", "Routing", "Retry", "Filters"], "messages are what both sides speak, and nothing more"),
        (["Config"], ["Listener", "HTTP1/Server", "HTTP2/Server", "HTTP1/Client", "HTTP2/Client", "Admin", "Message"],
         "the config is read before anything runs"),
        (["Call", "Upstream", "Listener", "Routing", "Retry", "Filters", "Tracing", "Store", "Metrics", "Logging", "Config", "OpenAPI",
          "Message", "Cache"], ["Admin"], "the admin API sits on top"),
    ]

    static var sources: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources/Gateway")
    }

    /// A file's folder as the rules name it: HTTP1 and HTTP2 by side.
    static func folder(of relative: [String]) -> String {
        guard relative.count > 1 else { return "." }
        if relative[0].hasPrefix("HTTP"), relative.count > 2 { return "\(relative[0])/\(relative[1])" }
        return relative[0]
    }

    /// Each file's code without its comments and string literals, by folder.
    static func code() throws -> [(folder: String, file: String, code: String)] {
        let root = sources.standardizedFileURL.path
        var files: [(String, String, String)] = []
        let walker = FileManager.default.enumerator(atPath: root)
        while let path = walker?.nextObject() as? String {
            guard path.hasSuffix(".swift") else { continue }
            let text = try String(contentsOfFile: "\(root)/\(path)", encoding: .utf8)
            let code = text.split(separator: "\n", omittingEmptySubsequences: false).map { line -> Substring in
                let trimmed = line.drop { $0 == " " }
                if trimmed.hasPrefix("//") { return "" }
                return line.range(of: "//").map { line[..<$0.lowerBound] } ?? line
            }.joined(separator: "\n").replacing(/"[^"\n]*"/, with: "\"\"")
            files.append((folder(of: path.split(separator: "/").map(String.init)), path, code))
        }
        return files
    }

    @Test func noFolderNamesATypeOfAFolderItMayNotKnow() throws {
        let files = try Self.code()
        var declared: [String: String] = [:]
        let declaration = /^(?:(?:public|package|internal|fileprivate|private|final|indirect)\s+)*(?:class|struct|enum|protocol|actor|typealias)\s+([A-Z][A-Za-z0-9]*)/
            .anchorsMatchLineEndings()
        for file in files {
            for match in file.code.matches(of: declaration) { declared[String(match.1)] = file.folder }
        }
        #expect(declared["CallRunner"] == "Call" && declared["UpstreamPool"] == "Upstream", "the sources were read")
        var arrows: [String] = []
        for file in files {
            let names = Set(file.code.matches(of: /\b[A-Z][A-Za-z0-9]*\b/).map { String($0.0) })
            for rule in Self.forbidden where rule.from.contains(file.folder) {
                for name in names.sorted() {
                    guard let owner = declared[name], owner != file.folder, rule.to.contains(owner) else { continue }
                    arrows.append("\(file.file) names \(name) of \(owner)/: \(rule.why)")
                }
            }
        }
        #expect(arrows.isEmpty, "\(arrows.joined(separator: "\n"))")
    }

    @Test func aWrongWayArrowIsFound() {
        // The rules read what they should: a call type in the upstream side is caught.
        let rule = Self.forbidden[0]
        #expect(rule.from.contains(Self.folder(of: ["Upstream", "UpstreamPool.swift"])) && rule.to.contains(Self.folder(of: ["Call", "Call.swift"])))
        #expect(Self.folder(of: ["HTTP1", "Client", "HTTP1UpstreamConnection.swift"]) == "HTTP1/Client")
    }
}
