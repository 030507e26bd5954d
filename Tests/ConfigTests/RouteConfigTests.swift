import Testing

@testable import Config

struct RouteConfigTests {
    /// A config with one route given by its JSON members, plus a static provider.
    static func config(route: String) -> String {
        "{\(staticProvider), \"routes\": [{\(route)}]}"
    }

    static let bad: [(route: String, errors: [String])] = [
        (#""path": "/a/", "upstream": "http://x/""#, ["routes[0].name: is required"]),
        (#""name": "a", "upstream": "http://x/""#, ["routes[0].path: is required"]),
        (
            #""name": "a b", "path": "/a/", "upstream": "http://x/""#,
            ["routes[0].name: may contain only letters, digits, '.', '_' and '-'"]
        ),
        (#""name": "", "path": "/a/", "upstream": "http://x/""#, ["routes[0].name: must not be empty"]),
        (
            #""name": "_probe", "path": "/a/", "upstream": "http://x/""#,
            ["routes[0].name: \"_probe\" is reserved: the proxy's own requests are counted and logged under it"]
        ),
        (
            #""name": "_unrouted", "path": "/a/", "upstream": "http://x/""#,
            ["routes[0].name: \"_unrouted\" is reserved: the proxy's own requests are counted and logged under it"]
        ),
        (#""name": "a", "path": "a/", "upstream": "http://x/""#, ["routes[0].path: must begin with \"/\""]),
        (
            #""name": "a", "path": "/a?b", "upstream": "http://x/""#,
            ["routes[0].path: must not contain spaces, control characters, '?' or '#'"]
        ),
        (
            #""name": "a", "path": "/a/../b/", "upstream": "http://x/""#,
            ["routes[0].path: must not contain \".\" or \"..\" segments"]
        ),
        (
            #""name": "a", "path": "/_platform/x", "upstream": "http://x/""#,
            ["routes[0].path: \"/_platform/\" is reserved for the proxy's own endpoints"]
        ),
        (#""name": "a", "path": "/a/""#, ["routes[0]: needs an \"upstream\", a \"mock\" directory, or both"]),
        (
            #""name": "a", "path": "/a/", "upstream": "example.com""#,
            ["routes[0].upstream: expected an absolute http or https URL, but it has no scheme"]
        ),
        (
            #""name": "a", "path": "/a/", "upstream": "https://user:pw@example.com/""#,
            ["routes[0].upstream: expected an absolute http or https URL, but user info (user@) is not allowed"]
        ),
        (
            #""name": "a", "path": "/a/", "upstream": "https://example.com/#top""#,
            ["routes[0].upstream: expected an absolute http or https URL, but a fragment (#) is not allowed"]
        ),
        (
            #""name": "a", "path": "/a/", "upstream": "https://example.com/?a=1""#,
            ["routes[0].upstream: must not have a query string (the client's query is passed on)"]
        ),
        (
            #""name": "a", "path": "/a/", "upstream": "http://x/", "credential": "bearer""#,
            ["routes[0].credential: expected \"access_token\", \"jwt\" or \"none\", not \"bearer\""]
        ),
        (
            #""name": "a", "path": "/a/", "upstream": "http://x/", "headers": []"#,
            ["routes[0].headers: must list at least one header name"]
        ),
        (
            #""name": "a", "path": "/a/", "upstream": "http://x/", "headers": ["X Auth", "Host", "authorization", "Authorization"]"#,
            [
                "routes[0].headers[0]: \"X Auth\" is not a valid header name",
                "routes[0].headers[1]: \"Host\" cannot carry a credential: the proxy manages that header",
                "routes[0].headers[3]: \"Authorization\" is listed twice",
            ]
        ),
        (
            #""name": "a", "path": "/a/", "upstream": "http://x/", "redirects": {"max": 21}"#,
            ["routes[0].redirects.max: expected an integer from 0 to 20, not 21"]
        ),
        (
            #""name": "a", "path": "/a/", "upstream": "http://x/", "redirects": {"credentialHosts": ["a b", "h:0", 3]}"#,
            [
                "routes[0].redirects.credentialHosts[0]: \"a b\" is not a host or host:port",
                "routes[0].redirects.credentialHosts[1]: the port in \"h:0\" is not a number from 1 to 65535",
                "routes[0].redirects.credentialHosts[2]: expected a string, not a number",
            ]
        ),
        (
            #""name": "a", "path": "/a/", "mock": {"directory": "m"}, "redirects": {"follow": false}"#,
            ["routes[0].redirects: only applies to a route with an upstream"]
        ),
        (
            #""name": "a", "path": "/a/", "upstream": "http://x/", "timeoutSeconds": 0"#,
            ["routes[0].timeoutSeconds: expected a number of seconds greater than 0, not 0"]
        ),
        (
            #""name": "a", "path": "/a/", "upstream": "http://x/", "retryOn401": "yes""#,
            ["routes[0].retryOn401: expected true or false, not a string"]
        ),
        (#""name": "a", "path": "/a/", "mock": {"mode": "replay"}"#, ["routes[0].mock.directory: is required"]),
        (
            #""name": "a", "path": "/a/", "mock": {"directory": "m", "mode": "record"}"#,
            ["routes[0].mock.mode: \"record\" needs an upstream to record from"]
        ),
        (
            #""name": "a", "path": "/a/", "mock": {"directory": "m", "mode": "live"}"#,
            ["routes[0].mock.mode: expected \"replay\", \"record\" or \"off\", not \"live\""]
        ),
        (
            #""name": "a", "path": "/a/", "mock": {"directory": "m", "overwrite": 1, "dir": "x"}"#,
            ["routes[0].mock.dir: unknown key", "routes[0].mock.overwrite: expected true or false, not a number"]
        ),
        (
            #""name": 1, "path": 2, "upstream": 3, "timeoutSeconds": -1"#,
            [
                "routes[0].name: expected a string, not a number", "routes[0].path: expected a string, not a number",
                "routes[0].upstream: expected a string, not a number",
                "routes[0].timeoutSeconds: expected a number of seconds greater than 0, not -1",
            ]
        ),
    ]

    @Test("each bad route in the table yields exactly its expected errors", arguments: bad)
    func badRoutes(route: String, expected: [String]) {
        #expect(configErrors(RouteConfigTests.config(route: route)) == expected)
    }

    @Test("credentialHosts are stored as host:port with the upstream scheme's default port")
    func credentialHostsNormalized() throws {
        let config = try #require(
            validConfig(
                RouteConfigTests.config(
                    route: """
                        "name": "a", "path": "/a/", "upstream": "http://API.Example.com:8080/v1",
                        "redirects": {"credentialHosts": ["api.example.com", "Other.example.com:8443", "[::1]", "[::1]:9000", "api.example.com:80"]}
                        """)))
        let route = try #require(config.routes.first)
        #expect(route.upstream?.hostPort == "api.example.com:8080")
        #expect(
            route.redirects.credentialHosts == [
                "api.example.com:80", "other.example.com:8443", "[::1]:80", "[::1]:9000",
            ])
    }

    @Test("a bare credential host on an https upstream means port 443; the default is the upstream's own host:port")
    func credentialHostsHTTPS() throws {
        let config = try #require(
            validConfig(
                """
                {"routes": [
                  {"name": "a", "path": "/a/", "upstream": "https://api.example.com/", "redirects": {"credentialHosts": ["cdn.example.com"]}},
                  {"name": "b", "path": "/b/", "upstream": "http://127.0.0.1:9000/"}
                ]}
                """))
        #expect(config.routes[0].redirects.credentialHosts == ["cdn.example.com:443"])
        #expect(config.routes[1].redirects.credentialHosts == ["127.0.0.1:9000"])
    }

    @Test("route names and paths must be unique")
    func duplicates() {
        let errors = configErrors(
            """
            {"routes": [
              {"name": "a", "path": "/a/", "upstream": "http://x/"},
              {"name": "b", "path": "/a/", "upstream": "http://x/"},
              {"name": "a", "path": "/c/", "upstream": "http://x/"}
            ]}
            """)
        #expect(
            errors == [
                "routes[1].path: the path \"/a/\" is already used by routes[0]",
                "routes[2].name: the name \"a\" is already used by routes[0]",
            ])
    }

    @Test("a route asking for a credential without a provider is an error on its credential key")
    func credentialNeedsProvider() {
        let errors = configErrors(
            """
            {"routes": [
              {"name": "a", "path": "/a/", "upstream": "http://x/", "credential": "none"},
              {"name": "b", "path": "/b/", "upstream": "http://x/", "credential": "access_token"}
            ]}
            """)
        #expect(errors == ["routes[1].credential: needs a provider"])
    }

    @Test("jwt routes need a provider that issues id tokens")
    func jwtNeedsIDToken() {
        let route = #"{"name": "a", "path": "/a/", "upstream": "http://x/", "credential": "jwt"}"#
        #expect(
            configErrors(
                """
                {"provider": {"grant": "client_credentials", "tokenEndpoint": "https://idp/token", "clientID": "c",
                              "clientSecret": "s"}, "routes": [\(route)]}
                """) == [
                    "routes[0].credential: \"jwt\" needs an id_token, which grant \"client_credentials\" does not give"
                ])
        #expect(
            configErrors(
                """
                {"provider": {"grant": "static", "accessToken": "t"}, "routes": [\(route)]}
                """) == ["routes[0].credential: \"jwt\" needs provider.idToken with grant \"static\""])
        #expect(
            configErrors(
                """
                {"provider": {"discoveryURL": "https://idp/d", "clientID": "c", "redirectURI": "http://127.0.0.1/cb",
                              "scopes": ["read"]}, "routes": [\(route)]}
                """) == ["routes[0].credential: \"jwt\" needs the \"openid\" scope in provider.scopes"])
    }

    @Test("an invalid provider does not also make every credentialed route fail")
    func invalidProviderNoCascade() {
        let errors = configErrors(
            """
            {"provider": {"grant": "static"},
             "routes": [{"name": "a", "path": "/a/", "upstream": "http://x/", "credential": "access_token"}]}
            """)
        #expect(errors == ["provider.accessToken: is required for grant \"static\""])
    }

    @Test("a full route reads every field")
    func fullRoute() throws {
        let config = try #require(
            validConfig(
                RouteConfigTests.config(
                    route: """
                        "name": "api.v2_x-y", "path": "/api/", "upstream": "https://api.example.com/base",
                        "credential": "jwt", "headers": ["X-Token"], "retryOn401": true, "timeoutSeconds": 2.5,
                        "redirects": {"follow": false, "max": 0},
                        "mock": {"directory": "rec", "mode": "record", "overwrite": true}
                        """)))
        #expect(
            config.routes == [
                RouteConfiguration(
                    name: "api.v2_x-y", path: "/api/",
                    upstream: UpstreamURL(scheme: "https", host: "api.example.com", path: "/base"),
                    credential: .jwt, headers: ["X-Token"],
                    redirects: RedirectConfiguration(follow: false, max: 0, credentialHosts: ["api.example.com:443"]),
                    retryOn401: true, timeoutSeconds: 2.5,
                    mock: MockConfiguration(directory: "/etc/platform-proxy/rec", mode: .record, overwrite: true)
                ).withProvider("default")
            ])
    }
}
