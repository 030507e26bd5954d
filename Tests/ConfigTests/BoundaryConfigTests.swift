import Testing

@testable import Config

@Suite("Credential-boundary settings")
struct BoundaryConfigTests {
    private static let analytics = #""analytics": {"root": "r", "endpoint": "https://a.example/", "credential": "none""#

    @Test("defaults: reject encoded slashes, mask echoes, 30 s between 401 refreshes, analytics bounds")
    func defaults() throws {
        let config = try #require(
            validConfig(
                """
                {\(staticProvider), \(Self.analytics)},
                 "routes": [{"name": "a", "path": "/a/", "upstream": "http://x/", "credential": "access_token"}]}
                """))
        #expect(config.routes[0].encodedSlashes == .reject)
        #expect(config.routes[0].redirects.crossHostMethods == .safe)
        #expect(config.maskEchoedCredentials)
        #expect(config.provider?.minRefreshIntervalSeconds == 30)
        let analytics = try #require(config.analytics)
        #expect(analytics.maxKeyBytes == 256)
        #expect(analytics.maxValueBytes == 1024)
        #expect(analytics.maxEventsPerRequest == 1000)
        #expect(analytics.maxStoredBytes == 64 << 20)
        #expect(analytics.maxUploadBytes == 1 << 20)
    }

    @Test("given values are taken")
    func given() throws {
        let config = try #require(
            validConfig(
                """
                {"maskEchoedCredentials": false,
                 "provider": {"grant": "static", "accessToken": "t", "minRefreshIntervalSeconds": 5},
                 \(Self.analytics), "maxValueBytes": 10, "maxEventsPerRequest": 5, "maxStoredBytes": 2097152,
                   "maxUploadBytes": 4096, "maxKeyBytes": 300},
                 "routes": [{"name": "a", "path": "/a/", "upstream": "http://x/", "encodedSlashes": "forward",
                             "redirects": {"crossHostMethods": "all"}}]}
                """))
        #expect(config.routes[0].encodedSlashes == .forward)
        #expect(config.routes[0].redirects.crossHostMethods == .all)
        #expect(!config.maskEchoedCredentials)
        #expect(config.provider?.minRefreshIntervalSeconds == 5)
        #expect(config.analytics?.maxValueBytes == 10)
        #expect(config.analytics?.maxEventsPerRequest == 5)
        #expect(config.analytics?.maxStoredBytes == 2 << 20)
        #expect(config.analytics?.maxUploadBytes == 4096)
        #expect(config.analytics?.maxKeyBytes == 300)
    }

    @Test("bad values are reported with their JSON paths")
    func bad() {
        let errors = configErrors(
            """
            {"maskEchoedCredentials": "yes",
             \(Self.analytics), "maxStoredBytes": 10, "maxUploadBytes": 0, "maxValueBytes": 0, "maxKeyBytes": 10},
             "routes": [{"name": "a", "path": "/a/", "upstream": "http://x/", "encodedSlashes": "decode"}]}
            """)
        for path in [
            "maskEchoedCredentials", "analytics.maxStoredBytes", "analytics.maxUploadBytes",
            "analytics.maxValueBytes", "analytics.maxKeyBytes", "routes[0].encodedSlashes",
        ] {
            #expect(errors.contains { $0.hasPrefix(path + ":") }, "\(path) in \(errors)")
        }
    }
}
