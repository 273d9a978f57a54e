/// `openapi`: what the generated OpenAPI document says of itself.
public struct OpenAPIConfig: Sendable, Hashable {
    /// nil: the config file's name.
    public var title: String?
    /// nil: gatewayd's version.
    public var version: String?
    /// The document's `info.description` (nil: none).
    public var description: String?
    /// The base URLs clients use; none: each listener's own.
    public var servers: [String] = []
    /// Where the client listeners serve the document too (nil: only the admin listener's `/openapi.json`).
    public var path: String?
    /// The config file's name, the default title (set by `ConfigLoader`, not a key).
    public internal(set) var file = "gatewayd.yaml"

    /// The defaults above.
    public init() {}
}
