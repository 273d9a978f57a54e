import Foundation
import Rewriter
import Yams

/// Reads and validates a YAML config; every problem is reported, with its
/// file, line and key path, in one `ConfigError`.
public enum ConfigLoader {
    /// Reads the file at `file` (UTF-8 YAML), resolving `${VAR}` from `environment`.
    public static func load(file: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigError) -> LoadedConfig {
        var isDirectory: ObjCBool = false
        let exists = FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory)
        guard exists, !isDirectory.boolValue, let data = FileManager.default.contents(atPath: file) else {
            let reason = !exists ? "no such file" : isDirectory.boolValue ? "it is a directory" : "permission denied"
            let directory = FileManager.default.currentDirectoryPath
            throw ConfigError(issues: [ConfigIssue(file: file, path: "", message: "cannot read the file: \(reason) (working directory \(directory))")])
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw ConfigError(issues: [ConfigIssue(file: file, path: "", message: "the file is not UTF-8")])
        }
        return try load(yaml: text, file: file, environment: environment)
    }

    /// Reads `yaml`, naming `file` in every issue, resolving `${VAR}` from `environment`.
    public static func load(yaml: String, file: String = "<config>", environment: [String: String] = [:]) throws(ConfigError) -> LoadedConfig {
        var root: Node?
        // A duplicate key is an error, but not the last word: its first occurrence is set aside (the later
        // one is read, as most YAML readers do) and the file read again, so every other problem is found too.
        var text = yaml, duplicates: [ConfigIssue] = []
        while true {
            do {
                root = try Yams.compose(yaml: text, resolver)
                break
            } catch YamlError.duplicatedKeysInMapping(let keys, let context) {
                duplicates.append(ConfigIssue(file: file, line: context.mark.line, column: context.mark.column, path: "",
                                              message: "duplicate key: \(keys.joined(separator: ", ")) (the later one is read)"))
                guard duplicates.count <= 100, let aside = setAside(keys[0], at: context.mark, in: text, count: duplicates.count) else {
                    throw ConfigError(issues: duplicates)
                }
                text = aside
            } catch let error as YamlError {
                throw ConfigError(issues: duplicates + [issue(from: error, file: file, yaml: text)])
            } catch {
                throw ConfigError(issues: duplicates + [ConfigIssue(file: file, path: "", message: "\(error)")])
            }
        }
        guard let root else {
            throw ConfigError(issues: [ConfigIssue(file: file, line: 1, column: 1, path: "", message: "the file is empty")])
        }
        let reader = ConfigReader(file: file, environment: environment)
        var config = reader.readConfig(root)
        config?.openapi.file = file
        guard duplicates.isEmpty, reader.issues.isEmpty, let config else {
            throw ConfigError(issues: duplicates + reader.issues, warnings: reader.warnings)
        }
        return LoadedConfig(config: config, file: file, source: yaml, secrets: reader.secrets, warnings: reader.warnings)
    }

    /// The key written at `mark` renamed out of the way (`Fields` skips such
    /// keys), or nil when it is not found there as written.
    static func setAside(_ key: String, at mark: Mark, in text: String, count: Int) -> String? {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard mark.line >= 1, mark.line <= lines.count else { return nil }
        let line = lines[mark.line - 1]
        let start = line.index(line.startIndex, offsetBy: max(0, mark.column - 1), limitedBy: line.endIndex) ?? line.endIndex
        for spelling in [key, "\"\(key)\"", "'\(key)'"] where line[start...].hasPrefix(spelling) {
            lines[mark.line - 1] = line[..<start] + "\(Fields.setAsidePrefix)\(count)" + line[line.index(start, offsetBy: spelling.count)...]
            return lines.joined(separator: "\n")
        }
        return nil
    }

    /// YAML 1.2 core schema: only `true`/`false` are booleans (no `yes`/`no`/`on`),
    /// and dates stay strings.
    static let resolver = try! Resolver.default.removing(.timestamp).removing(.value)
        .replacing(.bool, with: "^(?:true|True|TRUE|false|False|FALSE)$")

    private static func issue(from error: YamlError, file: String, yaml: String) -> ConfigIssue {
        switch error {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _):
            // libyaml's words for a tab say nothing of tabs.
            let lines = yaml.split(separator: "\n", omittingEmptySubsequences: false)
            if mark.line >= 1, mark.line <= lines.count, lines[mark.line - 1].prefix(max(mark.column, 1)).contains("\t") {
                return ConfigIssue(file: file, line: mark.line, column: mark.column, path: "",
                                   message: "invalid YAML: a tab where YAML reads indentation; indent with spaces only")
            }
            let what = [context?.text, problem].compactMap { $0 }.filter { !$0.isEmpty }.joined(separator: " ")
            return ConfigIssue(file: file, line: mark.line, column: mark.column, path: "", message: "invalid YAML: \(what)")
        case .duplicatedKeysInMapping(let duplicates, let context):
            return ConfigIssue(file: file, line: context.mark.line, column: context.mark.column, path: "",
                               message: "duplicate key: \(duplicates.sorted().joined(separator: ", "))")
        default:
            return ConfigIssue(file: file, path: "", message: "invalid YAML: \(error)")
        }
    }
}

/// A config together with where it came from and the secrets it holds.
public struct LoadedConfig: Sendable {
    /// The configuration, validated.
    public var config: GatewayConfig
    /// The file it was read from (`<config>` for a string).
    public var file: String
    /// The YAML as loaded (interpolations unresolved).
    public var source: String
    /// Interpolated values, to be redacted wherever config is shown.
    public var secrets: [String]
    /// What loads but is probably not what was meant (`check` prints them).
    public var warnings: [ConfigIssue] = []

    /// The config as loaded, for showing: `${...}` interpolations stay
    /// unresolved, and any secret value that also appears literally is
    /// replaced by `<redacted>`.
    public var redacted: String {
        secrets.filter { !$0.isEmpty }.reduce(source) { text, secret in text.replacing(secret, with: "<redacted>") }
    }
}

extension ConfigReader {
    func readConfig(_ root: Node) -> GatewayConfig? {
        guard let fields = mapping(root, "", known: ["listeners", "admin", "limits", "upstreams", "filters", "default_filters", "routes", "logging", "tracing", "store", "openapi", "cache"]) else { return nil }
        defer { fields.finish() }
        var config = GatewayConfig(listeners: [])

        if let node = fields.take("listeners"), let items = sequence(node, "listeners") {
            config.listeners = items.enumerated().compactMap { readListener($1, "listeners[\($0)]") }
            if items.isEmpty { report(node, "listeners", "at least one listener is needed") }
        } else if !fields.has("listeners") {
            report(root, "listeners", "missing: at least one listener is needed")
        }
        if let node = fields.take("admin") { config.admin = readAdmin(node, "admin") }
        if let node = fields.take("limits") { config.limits = readLimits(node, "limits") }
        if let node = fields.take("tracing") { config.tracing = readTracing(node, "tracing") }
        if let node = fields.take("openapi"), let openapi = readOpenAPI(node, "openapi") { config.openapi = openapi }
        if let node = fields.take("cache"), let cache = readCache(node, "cache") { config.cache = cache }
        if let node = fields.take("logging"), let logging = mapping(node, "logging", known: ["access_log", "level", "format"]) {
            defer { logging.finish() }
            if let n = logging.take("format"), let v = oneOf(n, "logging.format", LoggingConfig.Format.self) { config.logging.format = v }
            if let n = logging.take("access_log") {
                if case .mapping = n {
                    // `{path: FILE}`: on, to that file.
                    if let log = mapping(n, "logging.access_log", known: ["path"]) {
                        defer { log.finish() }
                        if let p = log.take("path"), let v = string(p, "logging.access_log.path") { config.logging.accessLogPath = v }
                    }
                } else if let v = bool(n, "logging.access_log") {
                    config.logging.accessLog = v
                }
            }
            if let n = logging.take("level"), let v = oneOf(n, "logging.level", LoggingConfig.Level.self) { config.logging.level = v }
        }
        if let node = fields.take("store") { config.store = readStore(node, "store") }
        if let node = fields.take("upstreams") { config.upstreams = readUpstreams(node, "upstreams") }
        if let node = fields.take("filters") { config.filters = readFilters(node, "filters") }
        if let node = fields.take("default_filters") {
            config.defaultFilters = readFilterNames(node, "default_filters", declared: config.filters) ?? []
        }
        if let node = fields.take("routes"), let items = sequence(node, "routes") {
            let read = items.enumerated().map { ($0, readRoute($1, "routes[\($0)]", config: config)) }
            config.routes = read.compactMap(\.1)
            warnUnreachable(read.compactMap { index, route in route.map { (index, $0) } }, nodes: items)
        }
        checkAddresses(config, fields: fields)
        return config
    }

    private func checkAddresses(_ config: GatewayConfig, fields: Fields) {
        var seen: Set<SocketAddressSpec> = []
        let addresses = config.listeners.map(\.address) + (config.admin.map { [$0.address] } ?? [])
        for address in addresses where address.port != 0 && !seen.insert(address).inserted {
            report(fields.node, "listeners", "address \(address) is bound twice")
        }
    }

    func readListener(_ node: Node, _ path: String) -> ListenerConfig? {
        guard let fields = mapping(node, path, known: ["address", "protocols", "tls", "forwarded"]) else { return nil }
        defer { fields.finish() }
        var address: SocketAddressSpec?
        if let n = fields.take("address") {
            address = readAddress(n, fields.path("address"))
        } else {
            report(node, fields.path("address"), "missing")
        }
        var listener = ListenerConfig(address: address ?? SocketAddressSpec(host: "", port: 0))
        if let n = fields.take("tls"), let tls = mapping(n, fields.path("tls"), known: ["certificate", "private_key"]) {
            defer { tls.finish() }
            let certificate = tls.take("certificate").flatMap { string($0, tls.path("certificate")) }
            let key = tls.take("private_key").flatMap { string($0, tls.path("private_key")) }
            if certificate == nil && !tls.has("certificate") { report(n, tls.path("certificate"), "missing") }
            if key == nil && !tls.has("private_key") { report(n, tls.path("private_key"), "missing") }
            if let certificate, let key { listener.tls = .init(certificate: resolvePath(certificate), privateKey: resolvePath(key)) }
            listener.protocols = [.http1, .h2]
        }
        if let n = fields.take("protocols"), let items = sequence(n, fields.path("protocols")) {
            let protocols = items.enumerated().compactMap { oneOf($1, fields.path("protocols") + "[\($0)]", ListenerConfig.HTTPProtocol.self) }
            if protocols.isEmpty { report(n, fields.path("protocols"), "at least one protocol is needed") }
            if listener.tls == nil, protocols.contains(.h2) {
                report(n, fields.path("protocols"), "h2 needs tls (use h2c for HTTP/2 without TLS)")
            }
            if listener.tls != nil, protocols.contains(.h2c) {
                report(n, fields.path("protocols"), "h2c is HTTP/2 without TLS; on a TLS listener use h2")
            }
            listener.protocols = protocols
        }
        if let n = fields.take("forwarded"), let forwarded = mapping(n, fields.path("forwarded"), known: ["trust"]) {
            defer { forwarded.finish() }
            if let t = forwarded.take("trust"), let items = sequence(t, forwarded.path("trust")) {
                listener.trustedProxies = items.enumerated().compactMap { index, item in
                    guard let text = string(item, forwarded.path("trust") + "[\(index)]") else { return nil }
                    guard let range = AddressRange(text) else {
                        report(item, forwarded.path("trust") + "[\(index)]", "expected an address or CIDR range such as 10.0.0.0/8 or ::1, found '\(text)'")
                        return nil
                    }
                    return range
                }
            }
        }
        return address == nil ? nil : listener
    }

    func readAddress(_ node: Node, _ path: String) -> SocketAddressSpec? {
        guard let text = string(node, path) else { return nil }
        guard let address = SocketAddressSpec.parse(text) else {
            if let port = text.split(separator: ":").last.flatMap({ Int($0) }), !(0...65535).contains(port) {
                report(node, path, "port \(port) is out of range: a port is 0 to 65535 (0: any free port)")
            } else {
                report(node, path, "expected host:port or [v6]:port, found '\(text)'")
            }
            return nil
        }
        return address
    }

    func resolvePath(_ path: String) -> String {
        path.hasPrefix("/") ? path : (baseDirectory as NSString).appendingPathComponent(path)
    }

    func readAdmin(_ node: Node, _ path: String) -> AdminConfig? {
        guard let fields = mapping(node, path, known: ["address", "allow_remote", "token"]) else { return nil }
        defer { fields.finish() }
        let allowRemoteNode = fields.take("allow_remote")
        let allowRemote = allowRemoteNode.flatMap { bool($0, fields.path("allow_remote")) } ?? false
        var token: String?
        if let n = fields.take("token"), let value = string(n, fields.path("token")) {
            if value.utf8.count < 16 { report(n, fields.path("token"), "too short: at least 16 characters") } else { token = value }
        }
        // Reachable from elsewhere, it must not reload or show config to anyone who asks.
        if allowRemote, token == nil, let allowRemoteNode {
            report(allowRemoteNode, fields.path("allow_remote"), "a non-loopback admin endpoint needs admin.token")
        }
        guard let n = fields.take("address") else {
            report(node, fields.path("address"), "missing")
            return nil
        }
        guard let address = readAddress(n, fields.path("address")) else { return nil }
        // The admin endpoint reloads and shows config: loopback only unless asked.
        if !allowRemote, !address.isLoopback {
            report(n, fields.path("address"), "\(address) is not a loopback address; set admin.allow_remote: true to expose the admin endpoint")
        }
        return AdminConfig(address: address, allowRemote: allowRemote, token: token)
    }

    func readLimits(_ node: Node, _ path: String) -> Limits {
        var limits = Limits()
        guard let fields = mapping(node, path, known: [
            "max_header_bytes", "max_body_bytes", "max_response_body_bytes", "max_refresh_body_bytes", "header_timeout", "idle_timeout",
            "drain_timeout",
        ]) else {
            return limits
        }
        defer { fields.finish() }
        if let n = fields.take("max_header_bytes"), let v = int(n, fields.path("max_header_bytes"), in: 1024...1_048_576) {
            limits.maxHeaderBytes = v
        }
        if let n = fields.take("max_body_bytes"), let v = int(n, fields.path("max_body_bytes"), in: 1...Int(Int32.max)) {
            limits.maxBodyBytes = v
        }
        if let n = fields.take("max_response_body_bytes"), let v = int(n, fields.path("max_response_body_bytes"), in: 0...Int(Int32.max)) {
            limits.maxResponseBodyBytes = v
        }
        if let n = fields.take("max_refresh_body_bytes"), let v = int(n, fields.path("max_refresh_body_bytes"), in: 0...Int(Int32.max)) {
            limits.maxRefreshBodyBytes = v
        }
        if let n = fields.take("header_timeout"),
           let v = duration(n, fields.path("header_timeout"), atLeast: .milliseconds(100), effect: "would drop every connection before its head arrives") {
            limits.headerTimeout = v
        }
        if let n = fields.take("idle_timeout"),
           let v = duration(n, fields.path("idle_timeout"), atLeast: .milliseconds(100), effect: "would close every keep-alive connection at once") {
            limits.idleTimeout = v
        }
        if let n = fields.take("drain_timeout"), let v = duration(n, fields.path("drain_timeout")) { limits.drainTimeout = v }
        return limits
    }

    func readUpstreams(_ node: Node, _ path: String) -> [UpstreamConfig] {
        guard let fields = mapping(node, path, known: nil) else { return [] }
        var upstreams: [UpstreamConfig] = []
        declaredUpstreams = fields.keys
        for entry in fields.entries {
            let p = fields.path(entry.key)
            if entry.key == UpstreamConfig.echoName {
                report(entry.keyNode, p, "'echo' is built in; give this upstream another name")
                continue
            }
            if let upstream = readUpstream(entry.value, p, name: entry.key) { upstreams.append(upstream) }
        }
        return upstreams
    }

    func readUpstream(_ node: Node, _ path: String, name: String) -> UpstreamConfig? {
        guard let fields = mapping(node, path, known: ["url", "endpoints", "balance", "health_check", "outlier", "max_pending", "max_requests",
                                                      "max_connections", "connect_timeout", "idle_timeout", "http2", "headers", "tls"]) else { return nil }
        defer { fields.finish() }
        // A bad url is reported with every other problem of the upstream, not alone.
        let endpoints = readEndpoints(node, fields)
        let url = endpoints?[0] ?? UpstreamURL("http://127.0.0.1")!
        var upstream = UpstreamConfig(name: name, url: url)
        upstream.endpoints = endpoints ?? [url]
        if let n = fields.take("balance"), let text = string(n, fields.path("balance")) {
            if let balance = Balance(rawValue: text) { upstream.balance = balance } else {
                report(n, fields.path("balance"), "expected \(Balance.allCases.map(\.rawValue).joined(separator: ", ")), found '\(text)'")
            }
        }
        if let n = fields.take("health_check") { upstream.healthCheck = readHealthCheck(n, fields.path("health_check")) }
        if let n = fields.take("outlier") { upstream.outlier = readOutlier(n, fields.path("outlier")) }
        if let n = fields.take("max_pending"), let v = int(n, fields.path("max_pending"), in: 0...1_000_000) { upstream.maxPending = v }
        if let n = fields.take("max_requests"), let v = int(n, fields.path("max_requests"), in: 1...1_000_000) { upstream.maxRequests = v }
        if let n = fields.take("max_connections"), let v = int(n, fields.path("max_connections"), in: 1...100_000) {
            upstream.maxConnections = v
        }
        if let n = fields.take("connect_timeout"),
           let v = duration(n, fields.path("connect_timeout"), atLeast: .milliseconds(1), effect: "would fail every connection (502)") {
            upstream.connectTimeout = v
        }
        if let n = fields.take("idle_timeout"),
           let v = duration(n, fields.path("idle_timeout"), atLeast: .milliseconds(1), effect: "would close every pooled connection before its reuse") {
            upstream.idleTimeout = v
        }
        if let n = fields.take("http2"), let v = bool(n, fields.path("http2")) { upstream.http2 = v }
        if let n = fields.take("headers") { upstream.headers = readHeaderRules(n, fields.path("headers")) }
        if let n = fields.take("tls"), let tls = mapping(n, fields.path("tls"), known: ["ca_file", "server_name"]) {
            defer { tls.finish() }
            if endpoints != nil, !url.isTLS { report(n, fields.path("tls"), "only an https upstream uses tls") }
            if let c = tls.take("ca_file"), let path = string(c, tls.path("ca_file")) {
                upstream.tls.caFile = resolvePath(path)
                if !FileManager.default.isReadableFile(atPath: resolvePath(path)) { report(c, tls.path("ca_file"), "cannot read \(resolvePath(path))") }
            }
            if let s = tls.take("server_name") { upstream.tls.serverName = string(s, tls.path("server_name")) }
        }
        return endpoints == nil ? nil : upstream
    }
}
