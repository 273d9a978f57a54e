// swift-tools-version:6.0
// A program that embeds gatewayd as a library, depending on it by version:
// a request modifier and a response validator in Swift, on top of the
// config, and their tests on GatewayTesting (no socket, the upstream a
// closure). GATEWAYD_PACKAGE_URL names where the package comes from (a git
// URL of gatewayd, or file:// of a clone with its version tags).
import PackageDescription

let gatewayd = Context.environment["GATEWAYD_PACKAGE_URL"] ?? "file:///usr/src/gatewayd"

let package = Package(
    name: "EmbeddedGateway",
    platforms: [.macOS(.v14)],
    dependencies: [.package(url: gatewayd, from: "0.1.0")],
    targets: [
        .target(name: "Hooks", dependencies: [.product(name: "Gateway", package: "gatewayd")]),
        .executableTarget(name: "EmbeddedGateway", dependencies: ["Hooks", .product(name: "Gateway", package: "gatewayd")]),
        .testTarget(name: "HooksTests", dependencies: ["Hooks", .product(name: "GatewayTesting", package: "gatewayd")]),
    ]
)
