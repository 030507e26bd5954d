// swift-tools-version:6.0
import PackageDescription

// Zero SwiftPM package dependencies: system C libraries only (design card).
// Release builds drop the run-time exclusivity checks (docs/ARCHITECTURE.md §13): they cost ~6 % of
// a forwarded request's instructions (bench/cost-profile.sh); debug builds, and so every test, keep them.
let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release)),
]

let package = Package(
    name: "platform-proxy",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "platform-proxy", targets: ["platform-proxy"]),
    ],
    targets: [
        .systemLibrary(name: "CLinux", path: "Sources/CLinux"),
        .systemLibrary(name: "CCurl", path: "Sources/CCurl", pkgConfig: "libcurl",
                       providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite", pkgConfig: "sqlite3",
                       providers: [.apt(["libsqlite3-dev"])]),
        .target(name: "JSON", swiftSettings: strict),
        .target(name: "Config", dependencies: ["JSON"], swiftSettings: strict),
        .target(name: "HTTP1", swiftSettings: strict),
        .target(name: "EventLoop", dependencies: ["CLinux", "JSON"], swiftSettings: strict),
        .target(name: "HTTPServer", dependencies: ["CLinux", "EventLoop", "HTTP1"], swiftSettings: strict),
        .target(name: "Upstream", dependencies: ["CCurl", "EventLoop", "HTTP1"], swiftSettings: strict),
        .target(name: "Credentials", dependencies: ["Config", "EventLoop", "JSON", "Upstream"], swiftSettings: strict),
        .target(name: "Analytics", dependencies: ["CSQLite", "Config", "EventLoop", "JSON", "Upstream"],
                swiftSettings: strict),
        .target(name: "Experiments", dependencies: ["Config", "Credentials", "EventLoop", "JSON"], swiftSettings: strict),
        .target(name: "Proxy", dependencies: ["Analytics", "Config", "Credentials", "EventLoop", "Experiments", "HTTP1", "HTTPServer", "JSON", "Upstream"], swiftSettings: strict),
        .executableTarget(name: "platform-proxy", dependencies: ["Proxy", "Config", "EventLoop"], swiftSettings: strict),
        .testTarget(name: "JSONTests", dependencies: ["JSON"]),
        .testTarget(name: "ConfigTests", dependencies: ["Config", "JSON"]),
        .testTarget(name: "HTTP1Tests", dependencies: ["HTTP1"]),
        .testTarget(name: "EventLoopTests", dependencies: ["EventLoop"]),
        .testTarget(name: "HTTPServerTests", dependencies: ["HTTPServer", "EventLoop", "HTTP1"]),
        .testTarget(name: "UpstreamTests", dependencies: ["Upstream", "EventLoop"]),
        .testTarget(name: "CredentialsTests", dependencies: ["Credentials", "Config", "JSON"]),
        .testTarget(name: "AnalyticsTests", dependencies: ["Analytics", "JSON"]),
        .testTarget(name: "ExperimentsTests", dependencies: ["Experiments", "Config", "Credentials", "JSON"]),
        .testTarget(name: "ProxyTests", dependencies: ["Proxy", "Config", "Credentials", "Experiments", "HTTP1", "EventLoop", "HTTPServer", "JSON", "Upstream"]),
    ]
)
