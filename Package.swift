// swift-tools-version:6.2
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "pushfleet",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "pushfleet", targets: ["pushfleet"]),
        .library(name: "PushFleetBackend", targets: ["PushFleetBackend"]),
        .library(name: "PushFleetMockPush", targets: ["PushFleetMockPush"]),
        .library(name: "PushFleetEmbedded", targets: ["PushFleetEmbedded"]),
        .library(name: "PushFleetHub", targets: ["PushFleetHub"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
        .package(url: "https://github.com/vapor/sqlite-nio.git", from: "1.13.2"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
        .package(url: "https://github.com/swiftlang/swift-subprocess.git", from: "1.0.2"),
        .package(url: "https://github.com/swift-otel/swift-w3c-trace-context.git", from: "1.0.0"),
        .package(url: "https://github.com/apple/swift-system.git", from: "1.8.1"),
    ],
    targets: [
        // Wire formats shared by the backend, the mock push service and the device clients.
        .target(name: "PushFleetWire", dependencies: ["PushFleetCore"], swiftSettings: swiftSettings),
        // Pure domain: no I/O, no clocks read except through WallClock, no networking.
        .target(name: "PushFleetCore", swiftSettings: swiftSettings),
        // The delivery ledger, its judge and the hops: what each (send, device) pair became and
        // why. Pure, above the scenario model; the servers never link it.
        .target(name: "PushFleetLedger", dependencies: ["PushFleetCore"], swiftSettings: swiftSettings),
        // Web Push's cryptography (RFC 8291 message encryption, RFC 8292 VAPID): pure, for the
        // push service, the backends, the hub and the virtual browsers alike.
        .target(
            name: "PushFleetWebPush",
            dependencies: ["PushFleetCore", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),
        // Traces a run exports over OTLP: spans built from what it recorded, under the ids its
        // requests carried (docs/tracing.md).
        .target(
            name: "PushFleetTraces",
            dependencies: [
                "PushFleetCore",
                "PushFleetResults",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // Scenario files: YAML text to a validated Scenario, with positioned errors.
        .target(
            name: "PushFleetScenario",
            dependencies: ["PushFleetCore", .product(name: "Yams", package: "Yams")],
            swiftSettings: swiftSettings
        ),
        // What a run measured (run.json's model): the report target needs nothing else.
        .target(
            name: "PushFleetResults",
            dependencies: ["PushFleetCore", "PushFleetLedger", .product(name: "Histogram", package: "hdrhistogram-swift")],
            swiftSettings: swiftSettings
        ),
        // Events to numbers: the recorder, the ledger's judgement into a result, live metrics.
        .target(
            name: "PushFleetMetrics",
            dependencies: [
                "PushFleetCore",
                "PushFleetLedger",
                "PushFleetResults",
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: swiftSettings
        ),
        // The fleet's sockets: the HTTP pool, https through AsyncHTTPClient, devices' own WebSockets
        // and the multiplexed gateway connection.
        .target(
            name: "PushFleetClients",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
                "PushFleetCore",
                "PushFleetWire",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The fleet: virtual devices, senders, push channels, faults; the system under test is
        // only its URLs here.
        .target(
            name: "PushFleetEngine",
            dependencies: [
                "PushFleetCore",
                "PushFleetLedger",
                "PushFleetWire",
                "PushFleetResults",
                "PushFleetMetrics",
                "PushFleetClients",
                "PushFleetWebPush",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Subprocess", package: "swift-subprocess"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: swiftSettings
        ),
        // Starts what a scenario's target names (the embedded system, or an embedded push
        // service beside an external backend) and plays the fleet against it.
        .target(
            name: "PushFleetLauncher",
            dependencies: [
                "PushFleetCore",
                "PushFleetLedger",
                "PushFleetEngine",
                "PushFleetMetrics",
                "PushFleetResults",
                "PushFleetEmbedded",
                "PushFleetBackend",
                "PushFleetMockPush",
                "PushFleetServerSupport",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // Report files from a run's result: no I/O of its own, the CLI writes the bytes.
        .target(
            name: "PushFleetReport",
            dependencies: ["PushFleetCore", "PushFleetLedger", "PushFleetResults"],
            swiftSettings: swiftSettings
        ),
        // Small pieces both servers need on top of Hummingbird.
        .target(
            name: "PushFleetServerSupport",
            dependencies: [
                "PushFleetCore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOHTTPTypesHTTP2", package: "swift-nio-extras"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // A stand-in for Azure Notification Hubs: its REST API over the push service's router.
        .target(
            name: "PushFleetHub",
            dependencies: [
                "PushFleetCore",
                "PushFleetServerSupport",
                "PushFleetWebPush",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "PushFleetBackend",
            dependencies: [
                .product(name: "W3CTraceContext", package: "swift-w3c-trace-context"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                "PushFleetWire",
                "PushFleetHub",
                "PushFleetCore",
                "PushFleetWebPush",
                "PushFleetServerSupport",
                "PushFleetClients",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "SQLiteNIO", package: "sqlite-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "PushFleetMockPush",
            dependencies: [
                .product(name: "SwiftASN1", package: "swift-asn1"),
                "PushFleetWire",
                "PushFleetHub",
                "PushFleetCore",
                "PushFleetWebPush",
                "PushFleetServerSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "PushFleetEmbedded",
            dependencies: [
                "PushFleetBackend",
                "PushFleetCore",
                "PushFleetHub",
                "PushFleetMockPush",
                "PushFleetServerSupport",
                "PushFleetWebPush",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The benchmarks (`pushfleet bench …`): one command per bench, beside the reference tools
        // and child processes they run.
        .target(
            name: "PushFleetBench",
            dependencies: [
                "PushFleetCore",
                "PushFleetLedger",
                "PushFleetBackend",
                "PushFleetWebPush",
                "PushFleetScenario",
                "PushFleetEngine",
                "PushFleetResults",
                "PushFleetClients",
                "PushFleetLauncher",
                "PushFleetReport",
                "PushFleetServerSupport",
                "PushFleetMockPush",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Subprocess", package: "swift-subprocess"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "pushfleet",
            dependencies: [
                "PushFleetCore",
                "PushFleetLedger",
                "PushFleetScenario",
                "PushFleetEngine",
                "PushFleetResults",
                "PushFleetMetrics",
                "PushFleetLauncher",
                "PushFleetReport",
                "PushFleetServerSupport",
                "PushFleetEmbedded",
                "PushFleetBackend",
                "PushFleetMockPush",
                "PushFleetHub",
                "PushFleetWebPush",
                "PushFleetWire",
                "PushFleetBench",
                "PushFleetTraces",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Subprocess", package: "swift-subprocess"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: swiftSettings
        ),
        // Fuzz targets (docs/testing.md): in a normal build they replay the files they are given;
        // .ci/fuzz builds them with -sanitize=fuzzer -DPUSHFLEET_FUZZ into libFuzzer binaries.
        .target(name: "FuzzDriver", path: "Fuzz/Sources/FuzzDriver", swiftSettings: swiftSettings),
        .target(name: "CEpoll", path: "Benchmarks/CEpoll"),
        .executableTarget(
            name: "NIOFloor",
            dependencies: [
                "CEpoll",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ],
            path: "Benchmarks/NIOFloor",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "FuzzScenario",
            dependencies: ["FuzzDriver", "PushFleetScenario", "PushFleetCore"],
            path: "Fuzz/Sources/FuzzScenario",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "FuzzParsers",
            dependencies: [
                "FuzzDriver", "PushFleetCore", "PushFleetWire", "PushFleetServerSupport", "PushFleetBackend",
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            path: "Fuzz/Sources/FuzzParsers",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "FuzzServers",
            dependencies: [
                "FuzzDriver",
                "PushFleetEmbedded",
                "PushFleetBackend",
                "PushFleetMockPush",
                "PushFleetServerSupport",
                "PushFleetWire",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Fuzz/Sources/FuzzServers",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "FuzzWire",
            dependencies: [
                "FuzzDriver",
                "PushFleetClients",
                "PushFleetCore",
                "PushFleetHub",
                "PushFleetMetrics",
                "PushFleetWire",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ],
            path: "Fuzz/Sources/FuzzWire",
            swiftSettings: swiftSettings
        ),
        // Fixtures the live tests share: the embedded system, test devices, hostile backends, raw sockets.
        .target(
            name: "PushFleetTestSupport",
            dependencies: [
                "PushFleetCore",
                "PushFleetWire",
                "PushFleetServerSupport",
                "PushFleetBackend",
                "PushFleetHub",
                "PushFleetMockPush",
                "PushFleetEmbedded",
                "PushFleetWebPush",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ],
            path: "Tests/PushFleetTestSupport",
            swiftSettings: swiftSettings
        ),
        // Pure tests: no sockets, no servers, so a change to the core is checked in seconds.
        .testTarget(
            name: "PushFleetCoreTests",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
                "PushFleetWebPush",
                "PushFleetCore",
                "PushFleetLedger",
                "PushFleetScenario",
            ],
            swiftSettings: swiftSettings
        ),
        // The ledger and its judge, pure: no scenario files, no sockets.
        .testTarget(
            name: "PushFleetLedgerTests",
            dependencies: [
                "PushFleetCore",
                "PushFleetLedger",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            swiftSettings: swiftSettings
        ),
        // The fleet against live servers.
        // Pure tests of the fleet's sockets' parsers and state machines: no servers linked.
        .testTarget(
            name: "PushFleetClientsTests",
            dependencies: [
                "PushFleetClients",
                "PushFleetCore",
                "PushFleetWire",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // Pure tests of what a run records and reports: the event tape, sketches, capacity analysis.
        .testTarget(
            name: "PushFleetResultsTests",
            dependencies: [
                "PushFleetTraces",
                "PushFleetCore",
                "PushFleetLedger",
                "PushFleetMetrics",
                "PushFleetReport",
                "PushFleetResults",
                "PushFleetScenario",
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PushFleetEngineTests",
            dependencies: [
                "PushFleetMockPush",
                "PushFleetEmbedded",
                "PushFleetBackend",
                "PushFleetTestSupport",
                "PushFleetCore",
                "PushFleetLedger",
                "PushFleetWire",
                "PushFleetScenario",
                "PushFleetWebPush",
                "PushFleetResults",
                "PushFleetReport",
                "PushFleetMetrics",
                "PushFleetClients",
                "PushFleetEngine",
                "PushFleetLauncher",
                "PushFleetServerSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The servers: mock push service, hub, reference backend, TLS, hardening, stores.
        .testTarget(
            name: "PushFleetServerTests",
            dependencies: [
                "PushFleetTraces",
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                "PushFleetTestSupport",
                "PushFleetCore",
                "PushFleetWire",
                "PushFleetScenario",
                "PushFleetServerSupport",
                "PushFleetBackend",
                "PushFleetHub",
                "PushFleetMockPush",
                "PushFleetEmbedded",
                "PushFleetWebPush",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "PropertyBased", package: "swift-property-based"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The built executables: the pushfleet binary's commands and the fuzz targets' replay.
        .testTarget(
            name: "PushFleetCLITests",
            dependencies: [
                "PushFleetTestSupport",
                "PushFleetCore",
                "PushFleetLedger",
                "PushFleetResults",
                "PushFleetReport",
                "PushFleetEngine",
                "PushFleetLauncher",
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
