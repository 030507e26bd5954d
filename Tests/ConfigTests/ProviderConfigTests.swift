import Testing

@testable import Config

struct ProviderConfigTests {
    static let bad: [(provider: String, errors: [String])] = [
        (
            #"{"grant": "password"}"#,
            [
                "provider.grant: expected \"authorization_code\", \"client_credentials\", \"static\" or \"journey\", not \"password\""
            ]
        ),
        (
            #"{"discoveryURL": "https://idp/d", "redirectURI": "http://127.0.0.1/cb"}"#,
            ["provider.clientID: is required for grant \"authorization_code\""]
        ),
        (
            #"{"clientID": "c", "redirectURI": "http://127.0.0.1/cb"}"#,
            [
                "provider: needs \"discoveryURL\" or \"tokenEndpoint\" for grant \"authorization_code\"",
                "provider: needs \"discoveryURL\" or \"authorizationEndpoint\" for grant \"authorization_code\"",
            ]
        ),
        (
            #"{"clientID": "c", "tokenEndpoint": "https://idp/t", "redirectURI": "http://127.0.0.1/cb"}"#,
            ["provider: needs \"discoveryURL\" or \"authorizationEndpoint\" for grant \"authorization_code\""]
        ),
        (
            #"{"clientID": "c", "discoveryURL": "https://idp/d"}"#,
            ["provider.redirectURI: is required for grant \"authorization_code\""]
        ),
        (
            #"{"grant": "client_credentials", "clientID": "c", "tokenEndpoint": "https://idp/t"}"#,
            ["provider.clientSecret: is required for grant \"client_credentials\""]
        ),
        (
            #"{"grant": "client_credentials", "clientID": "c", "clientSecret": "s"}"#,
            ["provider: needs \"discoveryURL\" or \"tokenEndpoint\" for grant \"client_credentials\""]
        ),
        (
            #"{"grant": "client_credentials", "clientID": "c", "clientSecret": "s", "tokenEndpoint": "https://idp/t", "accessToken": "x"}"#,
            ["provider.accessToken: is used only with grant \"static\""]
        ),
        (#"{"grant": "static"}"#, ["provider.accessToken: is required for grant \"static\""]),
        (
            #"{"grant": "static", "accessToken": {"file": "/nonexistent/token"}}"#,
            ["provider.accessToken: cannot read /nonexistent/token: No such file or directory"]
        ),
        (
            #"{"grant": "static", "accessToken": "t", "tokenEndpoint": "mailto:x"}"#,
            ["provider.tokenEndpoint: expected an absolute http or https URL, but it has no scheme"]
        ),
        (
            #"{"grant": "static", "accessToken": "t", "scopes": ["openid", "two words", ""]}"#,
            [
                "provider.scopes[1]: \"two words\" is not a valid scope (no spaces, quotes or backslashes)",
                "provider.scopes[2]: must not be empty",
            ]
        ),
        (
            #"{"grant": "static", "accessToken": "t", "tokenType": "Bear er"}"#,
            ["provider.tokenType: \"Bear er\" is not a valid token type"]
        ),
        (
            #"{"grant": "static", "accessToken": "t", "refreshBeforeExpirySeconds": -1}"#,
            ["provider.refreshBeforeExpirySeconds: expected a number of seconds (0 or more), not -1"]
        ),
        (
            #"{"grant": "static", "accessToken": "t", "demo": {"idToken": "i", "expiresInSeconds": 0}}"#,
            [
                "provider.demo.accessToken: is required",
                "provider.demo.expiresInSeconds: expected a number of seconds greater than 0, not 0",
            ]
        ),
        (
            #"{"grant": "static", "accessToken": "t", "clientSecretz": "s"}"#,
            ["provider.clientSecretz: unknown key; did you mean \"clientSecret\"?"]
        ),
    ]

    @Test("each bad provider in the table yields exactly its expected errors", arguments: bad)
    func badProviders(provider: String, expected: [String]) {
        #expect(configErrors("{\"provider\": \(provider)}") == expected)
    }

    @Test("a provider with hand-written endpoints reads every field")
    func fullProvider() throws {
        let config = try #require(
            validConfig(
                """
                {"provider": {
                  "authorizationEndpoint": "https://idp.example/auth", "tokenEndpoint": "https://idp.example/token",
                  "revocationEndpoint": "https://idp.example/revoke", "userinfoEndpoint": "https://idp.example/userinfo",
                  "deviceAuthorizationEndpoint": "https://idp.example/device", "clientID": "abc",
                  "clientSecret": {"env": "SECRET"}, "redirectURI": "http://127.0.0.1:8080/_platform/callback",
                  "scopes": ["openid", "read"], "grant": "authorization_code", "refreshBeforeExpirySeconds": 30.5,
                  "tokenType": "DPoP", "demo": {"accessToken": "demo", "expiresInSeconds": 60}}}
                """, env: ["SECRET": "s3cret"]))
        let provider = try #require(config.provider)
        #expect(provider.authorizationEndpoint?.description == "https://idp.example/auth")
        #expect(provider.deviceAuthorizationEndpoint?.path == "/device")
        #expect(provider.clientSecret == .env("SECRET"))
        #expect(provider.redirectURI?.port == 8080)
        #expect(provider.refreshBeforeExpirySeconds == 30.5)
        #expect(provider.tokenType == "DPoP")
        #expect(provider.demo == DemoTokens(accessToken: .literal("demo"), idToken: nil, expiresInSeconds: 60))
        #expect(provider.discoveryURL == nil)
    }

    @Test("static grants need no client ID or endpoints")
    func staticGrantMinimal() throws {
        let config = try #require(validConfig(#"{"provider": {"grant": "static", "accessToken": "t"}}"#))
        #expect(config.provider == ProviderConfiguration(grant: .staticTokens, accessToken: .literal("t")))
    }
}

struct AnalyticsConfigTests {
    static let bad: [(analytics: String, errors: [String])] = [
        (#"{}"#, ["analytics.root: is required", "analytics.endpoint: is required"]),
        (
            #"{"root": "penn mobile", "endpoint": "https://a/"}"#,
            ["analytics.root: must not contain spaces or control characters"]
        ),
        (
            #"{"root": "penn..mobile", "endpoint": "https://a/"}"#,
            ["analytics.root: must not have empty segments (a leading, trailing or doubled '.')"]
        ),
        (
            #"{"root": ".penn", "endpoint": "https://a/"}"#,
            ["analytics.root: must not have empty segments (a leading, trailing or doubled '.')"]
        ),
        (#"{"root": "", "endpoint": "https://a/"}"#, ["analytics.root: must not be empty"]),
        (
            #"{"root": "p", "endpoint": "https://a/", "maxBatch": 0}"#,
            ["analytics.maxBatch: expected an integer from 1 to 10000, not 0"]
        ),
        (
            #"{"root": "p", "endpoint": "https://a/", "maxBatch": 10001}"#,
            ["analytics.maxBatch: expected an integer from 1 to 10000, not 10001"]
        ),
        (
            #"{"root": "p", "endpoint": "https://a/", "maxStoredEvents": 0, "product": -1}"#,
            [
                "analytics.product: expected a non-negative integer, not -1",
                "analytics.maxStoredEvents: expected a positive integer, not 0",
            ]
        ),
        (
            #"{"root": "p", "endpoint": "https://a/", "pushIntervalSeconds": 0, "bufferIntervalSeconds": -1}"#,
            [
                "analytics.pushIntervalSeconds: expected a number of seconds greater than 0, not 0",
                "analytics.bufferIntervalSeconds: expected a number of seconds (0 or more), not -1",
            ]
        ),
        (
            #"{"root": "p", "endpoint": "https://a/", "credential": "token"}"#,
            ["analytics.credential: expected \"access_token\", \"jwt\" or \"none\", not \"token\""]
        ),
        (#"{"root": "p", "endpoint": "https://a/", "credential": "jwt"}"#, []),
    ]

    @Test("analytics asking for a credential without a provider is an error; with credential none it is fine")
    func analyticsNeedsProvider() {
        #expect(
            configErrors(#"{"analytics": {"root": "p", "endpoint": "https://a/"}}"#)
                == ["analytics.credential: needs a provider"])
        #expect(configErrors(#"{"analytics": {"root": "p", "endpoint": "https://a/", "credential": "none"}}"#) == [])
    }

    @Test("each bad analytics block in the table yields exactly its expected errors", arguments: bad)
    func badAnalytics(analytics: String, expected: [String]) {
        #expect(configErrors("{\(staticProvider), \"analytics\": \(analytics)}") == expected)
    }

    @Test("a full analytics block reads every field")
    func fullAnalytics() throws {
        let config = try #require(
            validConfig(
                """
                {\(staticProvider), "analytics": {"root": "pennmobile.ios", "endpoint": "https://analytics.example/a/",
                 "credential": "jwt", "product": 7, "pushIntervalSeconds": 1.5, "expireIntervalSeconds": 60,
                 "bufferIntervalSeconds": 0, "maxBatch": 10000, "maxStoredEvents": 5}}
                """))
        #expect(
            config.analytics
                == AnalyticsConfiguration(
                    root: "pennmobile.ios",
                    endpoint: UpstreamURL(scheme: "https", host: "analytics.example", path: "/a/"),
                    credential: .jwt, product: 7, pushIntervalSeconds: 1.5, expireIntervalSeconds: 60,
                    bufferIntervalSeconds: 0, maxBatch: 10000, maxStoredEvents: 5
                ).withProvider("default"))
    }
}
