import Testing

@testable import Config

/// The tunnel and stream keys of a route and of `limits` (docs/websockets.md).
struct TunnelConfigTests {
    @Test("a route tunnels websocket for an hour by default; event streams get their own limit only when set")
    func defaults() throws {
        let config = try #require(validConfig(#"{"routes": [{"name": "a", "path": "/a/", "upstream": "http://x/"}]}"#))
        let route = try #require(config.routes.first)
        #expect(route.upgrades == ["websocket"])
        #expect(route.tunnelIdleTimeoutSeconds == 3600)
        #expect(route.streamIdleTimeoutSeconds == nil)
        #expect(config.limits.maxTunnels == 4096)
        #expect(config.limits.maxTunnelsPerClient == 1024)
    }

    @Test("upgrades are lowercased and read without a version, as a request's is; the timeouts and caps are read")
    func given() throws {
        let config = try #require(
            validConfig(
                """
                {"limits": {"maxTunnels": 10, "maxTunnelsPerClient": 2},
                 "routes": [{"name": "a", "path": "/a/", "upstream": "http://x/", "upgrades": ["WebSocket", "my-proto/2"],
                             "tunnelIdleTimeoutSeconds": 5, "streamIdleTimeoutSeconds": 120}]}
                """))
        let route = try #require(config.routes.first)
        #expect(route.upgrades == ["websocket", "my-proto"])
        #expect(route.tunnelIdleTimeoutSeconds == 5)
        #expect(route.streamIdleTimeoutSeconds == 120)
        #expect(config.limits.maxTunnels == 10)
        #expect(config.limits.maxTunnelsPerClient == 2)
    }

    static let bad: [(route: String, errors: [String])] = [
        (
            #""name": "a", "path": "/a/", "upstream": "http://x/", "upgrades": ["web socket"]"#,
            [#"routes[0].upgrades: "web socket" is not an Upgrade protocol name (letters, digits, - _ . /)"#]
        ),
        (
            #""name": "a", "path": "/a/", "upstream": "http://x/", "upgrades": ["/2"]"#,
            [#"routes[0].upgrades: "/2" is not an Upgrade protocol name (letters, digits, - _ . /)"#]
        ),
        (
            #""name": "a", "path": "/a/", "upstream": "http://x/", "tunnelIdleTimeoutSeconds": 0"#,
            ["routes[0].tunnelIdleTimeoutSeconds: expected a number of seconds greater than 0, not 0"]
        ),
        (
            #""name": "a", "path": "/a/", "upstream": "http://x/", "streamIdleTimeoutSeconds": -3"#,
            ["routes[0].streamIdleTimeoutSeconds: expected a number of seconds greater than 0, not -3"]
        ),
    ]

    @Test("bad tunnel keys name the key", arguments: bad)
    func badKeys(route: String, expected: [String]) {
        #expect(configErrors(RouteConfigTests.config(route: route)) == expected)
    }
}
