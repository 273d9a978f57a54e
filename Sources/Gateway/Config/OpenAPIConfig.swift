/// `openapi`: what the generated OpenAPI document says of itself.
public struct OpenAPIConfig: Sendable, Hashable {
    /// nil: the config file's name.
    public var title: String?
    /// nil: gatewayd's version.
    public var version: String?
    public var description: String?
    /// The base URLs clients use; none: each listener's own.
    public var servers: [String] = []

    public init() {}
}
