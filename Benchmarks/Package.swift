// swift-tools-version:6.1
// Rewriter micro-benchmarks; a package of its own so the test suite never builds it.
// Run: swift package benchmark
import PackageDescription

let package = Package(
    name: "gatewayd-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "gatewayd", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark.git", from: "1.38.1", traits: ["MallocInterposer"]),
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
        )
    ]
)
