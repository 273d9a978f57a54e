// swift-tools-version:6.1
// Linux (glibc) only: no Apple platform is declared or tested.
import PackageDescription

// No compiler flags of the kind SwiftPM refuses in a package depended on by version.
// The shipped binary's flags (exclusivity checked at compile time only) are
// scripts/release-build's.

let package = Package(
    name: "gatewayd",
    products: [
        .library(name: "Rewriter", targets: ["Rewriter"]),
        .library(name: "Gateway", targets: ["Gateway"]),
        // An embedder's tests: the gateway against Swift closures as upstreams, without sockets.
        .library(name: "GatewayTesting", targets: ["GatewayTesting"]),
        .executable(name: "gatewayd", targets: ["gatewayd"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-otel/swift-w3c-trace-context.git", from: "1.0.0"),
        // Proxy-Wasm filters run on WasmKit, a WebAssembly interpreter in Swift (fuel metering, memory limits).
        .package(url: "https://github.com/swiftwasm/WasmKit.git", from: "0.4.2"),
        // `swift package generate-documentation --target Gateway`: the embedder's reference (scripts/docs).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin.git", from: "1.5.0"),
    ],
    targets: [
        // libnghttp2 (Debian's libnghttp2-dev): both HTTP/2 legs, and the tests' independent frame client.
        .systemLibrary(name: "CNGHTTP2", pkgConfig: "libnghttp2", providers: [.apt(["libnghttp2-dev"])]),
        // hiredis (Debian's libhiredis-dev; its pkg-config flags are ones SwiftPM refuses, so none are read) without its I/O:
        // its command encoder and reply reader for the Redis store.
        .systemLibrary(name: "CHiredis"),
        // libxml2 (Debian's libxml2-dev) through its pull parser, with no DTD and no network: the answer side's XML.
        .systemLibrary(name: "CLibXML2", pkgConfig: "libxml-2.0", providers: [.apt(["libxml2-dev"])]),
        // zlib (Debian's zlib1g-dev): a translated route's gzip or deflate answer, inflated within its limit.
        .systemLibrary(name: "CZlib", providers: [.apt(["zlib1g-dev"])]),
        // Pure translation, both ways: the standard library, and libxml2 to read XML answers.
        .target(name: "Rewriter", dependencies: ["CLibXML2"]),
        .target(
            name: "Gateway",
            dependencies: [
                "Rewriter",
                "CNGHTTP2",
                "CHiredis",
                "CZlib",
                .product(name: "Yams", package: "Yams"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOExtras", package: "swift-nio-extras"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "W3CTraceContext", package: "swift-w3c-trace-context"),
                .product(name: "WasmKit", package: "WasmKit"),
            ]
        ),
        .target(
            name: "GatewayTesting",
            dependencies: [
                "Gateway",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "gatewayd",
            dependencies: [
                "Gateway",
                "Rewriter",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "RewriterTests",
            dependencies: [
                "Rewriter",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            // Read by path (XMLDecoderTests), not bundled.
            exclude: ["Corpus"]
        ),
        .testTarget(
            name: "GatewayTests",
            dependencies: [
                "Gateway",
                "GatewayTesting",
                "Rewriter",
                "CNGHTTP2",
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                // The tests write their filters in the WebAssembly text format.
                .product(name: "WAT", package: "WasmKit"),
            ],
            // The Python peers the tests run (ws_peer.py).
            exclude: ["Peers"]
        ),
    ]
)

// libFuzzer entry points (scripts/fuzz builds them with --sanitize=fuzzer,address;
// a plain build links them as small programs that do nothing).
for (name, dependencies) in [
    ("FuzzHTTP1Request", ["Gateway", "NIOCore"]), ("FuzzHTTP1Response", ["Gateway", "NIOCore", "NIOHTTP1"]),
    ("FuzzHeadWriter", ["Gateway", "NIOCore", "Rewriter"]), ("FuzzJSON", ["Rewriter"]), ("FuzzQuery", ["Rewriter"]),
    ("FuzzURITemplate", ["Rewriter"]), ("FuzzConfig", ["Gateway"]), ("FuzzHTTP2Request", ["Gateway"]),
    ("FuzzHTTP2Session", ["Gateway", "NIOCore", "NIOEmbedded", "Logging", "CoreMetrics"]),
    ("FuzzAccessLine", ["Gateway", "NIOCore"]), ("FuzzFilterHost", ["Gateway", "Rewriter", "WasmKit", "Logging", "CoreMetrics"]),
    ("FuzzRedisReader", ["Gateway", "NIOCore"]), ("FuzzOTLPTraces", ["Gateway", "NIOCore", "Rewriter", "W3CTraceContext"]),
    ("FuzzFleet", ["Gateway", "Rewriter"]), ("FuzzAnswer", ["Gateway", "Rewriter"]), ("FuzzCache", ["Gateway", "Rewriter"]),
    ("FuzzXML", ["Rewriter"]),
] as [(String, [String])] {
    package.targets.append(.executableTarget(
        name: name,
        dependencies: dependencies.map { dependency -> Target.Dependency in
            switch dependency {
            case "Gateway", "Rewriter": .target(name: dependency)
            case "Logging": .product(name: dependency, package: "swift-log")
            case "CoreMetrics": .product(name: dependency, package: "swift-metrics")
            case "WasmKit": .product(name: dependency, package: "WasmKit")
            case "W3CTraceContext": .product(name: dependency, package: "swift-w3c-trace-context")
            default: .product(name: dependency, package: "swift-nio")
            }
        },
        path: "Fuzz/\(name)"
    ))
}
