/// The version of this library and the `gatewayd` built from it.
public enum GatewayVersion {
    /// `MAJOR.MINOR.PATCH`, as `gatewayd --version` prints it and the Debian package is named.
    public static let current = "0.1.0"
}
