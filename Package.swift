// swift-tools-version:6.0
import PackageDescription

// Zero SwiftPM package dependencies: system C libraries only.
// Release builds drop the run-time exclusivity checks, a measurable share of a forwarded request's
// instructions (bench/cost-profile.sh); debug builds, and so every test, keep them.
// They also optimise across modules (the request path crosses HTTP1, HTTPServer, Upstream and Proxy),
// which bench/cost-profile.sh also measures.
// No module imports _StringProcessing (its code and its regex parser's are over a MiB of text; Config's
// TextSearch does the substring searches), and release code has a section per function for the
// release link's order below.
let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .unsafeFlags(["-Xfrontend", "-disable-implicit-string-processing-module-import"]),
    .unsafeFlags(
        ["-enforce-exclusivity=unchecked", "-cross-module-optimization", "-Xfrontend", "-function-sections"],
        .when(configuration: .release)),
]

// The release link: lld packs the relative relocations into a few KiB (DT_RELR, glibc >= 2.36)
// instead of the hundreds of KiB the loader would read at every start (bench/idle_memory.py); it
// places the functions listed in link-order.txt (the ones start-up, the health
// probe and forwarding run; bench/link-order.sh writes it) together at the front of the text, so
// the pages mapped at rest hold code that runs; it aligns segments to 64 KiB, so the kernel's
// 64 KiB fault-around windows fall on the same code in every process whatever the address
// randomisation; and it exports no symbols dynamically (the static
// standard library's link arguments ask for -export-dynamic: thousands of names that only the
// loader reads). None of this changes what the code does; a stale list only costs memory.
let packageRoot = String(#filePath.dropLast("Package.swift".count))
let releaseLink: [LinkerSetting] = [
    .unsafeFlags(
        [
            "-use-ld=lld",
            "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
            "-Xlinker", "-z", "-Xlinker", "max-page-size=65536",
            "-Xlinker", "--symbol-ordering-file=\(packageRoot)Sources/platform-proxy/link-order.txt",
            "-Xlinker", "--no-warn-symbol-ordering", "-Xlinker", "--no-export-dynamic",
        ],
        .when(configuration: .release))
]

// The libcurl tuning (Sources/CurlTuning/CurlTuning.swift says what each override does and how to
// switch it off): the executable defines poll(3), recv(2), send(2) and clock_gettime(2) and puts
// them in its dynamic symbol table, so libcurl's calls bind to them rather than to glibc's. Its
// only exports. With the tuning off each is glibc's call.
let interposedCalls: [LinkerSetting] = [
    .unsafeFlags([
        "-Xlinker", "--export-dynamic-symbol=poll",
        "-Xlinker", "--export-dynamic-symbol=recv",
        "-Xlinker", "--export-dynamic-symbol=send",
        "-Xlinker", "--export-dynamic-symbol=clock_gettime",
    ])
]

let package = Package(
    name: "platform-proxy",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "platform-proxy", targets: ["platform-proxy"])
    ],
    targets: [
        .systemLibrary(name: "CLinux", path: "Sources/CLinux"),
        .systemLibrary(
            name: "CCurl", path: "Sources/CCurl", pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]),
        // OpenSSL's libcrypto (the library libcurl's TLS already loads): client assertions are
        // signed with it (RFC 7523) and TLS client certificates checked against their keys.
        .systemLibrary(
            name: "CCrypto", path: "Sources/CCrypto", pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]),
        .systemLibrary(
            name: "CSQLite", path: "Sources/CSQLite", pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]),
        .target(name: "JSON", swiftSettings: strict),
        .target(name: "Config", dependencies: ["CCrypto", "JSON"], swiftSettings: strict),
        .target(name: "HTTP1", swiftSettings: strict),
        .target(name: "EventLoop", dependencies: ["CLinux", "JSON"], swiftSettings: strict),
        .target(name: "HTTPServer", dependencies: ["CLinux", "EventLoop", "HTTP1"], swiftSettings: strict),
        .systemLibrary(name: "CCurlTuning", path: "Sources/CCurlTuning"),
        .target(name: "Upstream", dependencies: ["CCurl", "EventLoop", "HTTP1"], swiftSettings: strict),
        .target(
            name: "CurlTuning", dependencies: ["CCurl", "CCurlTuning", "EventLoop", "Upstream"], swiftSettings: strict),
        .target(name: "Credentials", dependencies: ["Config", "EventLoop", "JSON", "Upstream"], swiftSettings: strict),
        .target(
            name: "Analytics", dependencies: ["CSQLite", "Config", "EventLoop", "HTTP1", "JSON", "Upstream"],
            swiftSettings: strict),
        .target(
            name: "Experiments", dependencies: ["Config", "Credentials", "EventLoop", "JSON"], swiftSettings: strict),
        .target(
            name: "Proxy",
            dependencies: [
                "Analytics", "Config", "Credentials", "EventLoop", "Experiments", "HTTP1", "HTTPServer", "JSON",
                "Upstream",
            ], swiftSettings: strict),
        .executableTarget(
            name: "platform-proxy",
            dependencies: ["Proxy", "Config", "CurlTuning", "EventLoop", "CLinux", "JSON", "Upstream"],
            exclude: ["link-order.txt"], swiftSettings: strict, linkerSettings: interposedCalls + releaseLink),
        .testTarget(name: "JSONTests", dependencies: ["JSON"]),
        .testTarget(name: "ConfigTests", dependencies: ["Config", "JSON"]),
        .testTarget(name: "HTTP1Tests", dependencies: ["HTTP1"]),
        .testTarget(name: "EventLoopTests", dependencies: ["EventLoop"]),
        .testTarget(name: "HTTPServerTests", dependencies: ["HTTPServer", "EventLoop", "HTTP1"]),
        .testTarget(name: "UpstreamTests", dependencies: ["Upstream", "EventLoop"]),
        .testTarget(name: "CurlTuningTests", dependencies: ["CurlTuning", "CCurlTuning", "Upstream", "EventLoop"]),
        .testTarget(name: "CredentialsTests", dependencies: ["Credentials", "Config", "JSON"]),
        .testTarget(name: "AnalyticsTests", dependencies: ["Analytics", "JSON"]),
        .testTarget(name: "ExperimentsTests", dependencies: ["Experiments", "Config", "Credentials", "JSON"]),
        .testTarget(name: "PlatformProxyTests", dependencies: ["platform-proxy"]),
        .testTarget(
            name: "ProxyTests",
            dependencies: [
                "Proxy", "Config", "Credentials", "Experiments", "HTTP1", "EventLoop", "HTTPServer", "JSON", "Upstream",
            ]),
    ]
)
