import Yams

extension ConfigReader {
    /// `openapi: {title, version, description, servers}`.
    func readOpenAPI(_ node: Node, _ path: String) -> OpenAPIConfig? {
        guard let fields = mapping(node, path, known: ["title", "version", "description", "servers", "path"]) else { return nil }
        defer { fields.finish() }
        var config = OpenAPIConfig()
        config.title = fields.take("title").flatMap { string($0, fields.path("title")) }
        config.version = fields.take("version").flatMap { string($0, fields.path("version")) }
        config.description = fields.take("description").flatMap { string($0, fields.path("description")) }
        if let n = fields.take("servers"), let servers = strings(n, fields.path("servers")) {
            for server in servers where !(server.hasPrefix("http://") || server.hasPrefix("https://")) {
                report(n, fields.path("servers"), "'\(server)' is not an http:// or https:// URL")
            }
            config.servers = servers
        }
        if let n = fields.take("path"), let path = string(n, fields.path("path")) {
            if path.hasPrefix("/"), !path.contains("?"), !path.contains("#"), !path.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F }) {
                config.path = path
            } else {
                report(n, fields.path("path"), "expected a path starting with '/' (no query, fragment or spaces), found '\(path)'")
            }
        }
        return config
    }
}
