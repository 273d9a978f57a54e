// swift-tools-version:6.1
// Micro-benchmarks (Rewriter, header types); a package of its own so the test suite never builds it.
// Run: swift package benchmark
import PackageDescription

let package = Package(
    name: "gatewayd-benchmarks",
    dependencies: [
        .package(name: "gatewayd", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark.git", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
    ],
    targets: [
        .executableTarget(
            name: "RewriterBenchmarks",
            dependencies: [
                .product(name: "Rewriter", package: "gatewayd"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/RewriterBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "HeaderBenchmarks",
            dependencies: [
                .product(name: "Rewriter", package: "gatewayd"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/HeaderBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // Allocations per call through the daemon on its default config; thresholds in Thresholds/.
        .executableTarget(
            name: "CallBenchmarks",
            dependencies: [
                .product(name: "Gateway", package: "gatewayd"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/CallBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // The SwiftNIO floor scripts/bench compares against (BENCH_NIO_FLOOR=1).
        .executableTarget(
            name: "NIOForwarder",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Benchmarks/NIOForwarder"
        ),
        // The h2c floor (BENCH_NIO_FLOOR=1): SwiftNIO and libnghttp2 with nothing of gatewayd's.
        .systemLibrary(name: "CNGHTTP2Bench", path: "Benchmarks/CNGHTTP2Bench", pkgConfig: "libnghttp2"),
        .executableTarget(
            name: "H2Forwarder",
            dependencies: [
                "CNGHTTP2Bench",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Benchmarks/H2Forwarder"
        ),
    ]
)
