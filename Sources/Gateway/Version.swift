public enum GatewayVersion {
    public static let current = "0.1.0"
}
