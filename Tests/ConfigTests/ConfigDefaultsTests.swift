import Testing

@testable import Config

struct ConfigDefaultsTests {
    @Test("an empty object yields every documented default")
    func emptyObjectDefaults() throws {
        let config = try #require(validConfig("{}"))
        #expect(config.listen == [.tcp(host: "127.0.0.1", port: 8080)])
        #expect(config.workers == 0)
        #expect(config.allowedHosts == ["localhost", "127.0.0.1", "[::1]"])
        #expect(config.apiKey == nil)
        #expect(config.stateDirectory == "/etc/platform-proxy/state")
        #expect(config.mock == false)
        #expect(config.provider == nil)
        #expect(config.gate == GateConfiguration(mode: .reject, waitSeconds: 10))
        #expect(
            config.limits
                == LimitsConfiguration(
                    maxHeaderBytes: 32768, maxBodyBytes: 104_857_600, retryBodyBytes: 1_048_576,
                    maxConnections: 10000, headerTimeoutSeconds: 10, idleTimeoutSeconds: 60))
        #expect(config.routes.isEmpty)
        #expect(config.analytics == nil)
        #expect(config.configDirectory == "/etc/platform-proxy")
        #expect(config == ProxyConfiguration(configDirectory: "/etc/platform-proxy"))
    }

    @Test("null for an optional key means the key is absent")
    func nullMeansAbsent() throws {
        let config = try #require(
            validConfig(
                """
                {"listen": null, "workers": null, "apiKey": null, "provider": null, "analytics": null,
                 "gate": {"mode": null, "waitSeconds": null}, "limits": null, "routes": null, "mock": null}
                """))
        #expect(config == ProxyConfiguration(configDirectory: testDirectory))
    }

    @Test("route, redirect, mock, provider and analytics fields take their defaults when left out")
    func nestedDefaults() throws {
        let config = try #require(
            validConfig(
                """
                {"provider": {"discoveryURL": "https://idp.example/.well-known/openid-configuration",
                              "clientID": "abc", "redirectURI": "http://127.0.0.1:8080/_platform/callback"},
                 "routes": [{"name": "a", "path": "/a/", "upstream": "https://api.example.com/a/",
                             "mock": {"directory": "mocks/a"}}],
                 "analytics": {"root": "app", "endpoint": "https://analytics.example.com/"}}
                """))
        let route = try #require(config.routes.first)
        #expect(route.credential == .none)
        #expect(route.headers == ["Authorization", "X-Authorization"])
        #expect(
            route.redirects == RedirectConfiguration(follow: true, max: 5, credentialHosts: ["api.example.com:443"]))
        #expect(route.retryOn401 == false)
        #expect(route.timeoutSeconds == 30)
        #expect(
            route.mock == MockConfiguration(directory: "/etc/platform-proxy/mocks/a", mode: .replay, overwrite: false))
        let provider = try #require(config.provider)
        #expect(provider.grant == .authorizationCode)
        #expect(provider.scopes == ["openid"])
        #expect(provider.refreshBeforeExpirySeconds == 60)
        #expect(provider.tokenType == "Bearer")
        #expect(provider.demo == nil)
        let analytics = try #require(config.analytics)
        #expect(
            analytics
                == AnalyticsConfiguration(
                    root: "app", endpoint: UpstreamURL(scheme: "https", host: "analytics.example.com"),
                    credential: .accessToken, product: 1, pushIntervalSeconds: 30, expireIntervalSeconds: 604_800,
                    bufferIntervalSeconds: 5, maxBatch: 500, maxStoredEvents: 100_000
                ).withProvider("default"))
    }

    @Test("the full example config loads")
    func specExample() throws {
        let config = try #require(validConfig(ConfigSamples.spec))
        #expect(config.listen == [.tcp(host: "127.0.0.1", port: 8080), .unix(path: "/run/platform-proxy/proxy.sock")])
        #expect(config.provider?.scopes == ["openid", "read", "introspection"])
        #expect(config.routes.map(\.name) == ["platform", "users-mock"])
        #expect(config.routes[0].redirects.credentialHosts == ["platform.pennlabs.org:443"])
        #expect(config.routes[1].upstream == nil)
        #expect(config.routes[1].mock?.directory == "/etc/platform-proxy/MockJSON/Users")
        #expect(config.analytics?.root == "pennmobile")
    }

    @Test("relative paths resolve against the config directory, with . and .. removed")
    func relativePaths() throws {
        let config = try #require(
            validConfig(
                """
                {"stateDirectory": "../var/./state/", "listen": ["unix:run/proxy.sock"],
                 "routes": [{"name": "m", "path": "/m/", "mock": {"directory": "/abs/mocks"}}]}
                """))
        #expect(config.stateDirectory == "/etc/var/state")
        #expect(config.listen == [.unix(path: "/etc/platform-proxy/run/proxy.sock")])
        #expect(config.routes[0].mock?.directory == "/abs/mocks")
    }

    @Test("a relative config directory is made absolute against the working directory")
    func relativeConfigDirectory() throws {
        let config = try #require(validConfig("{}", directory: "Config"))
        #expect(config.configDirectory.hasPrefix("/"))
        #expect(config.configDirectory.hasSuffix("/Config"))
        #expect(config.stateDirectory == config.configDirectory + "/state")
    }

    @Test("the default config path is Config/platform-proxy.json")
    func defaultPath() {
        #expect(ProxyConfiguration.defaultPath == "Config/platform-proxy.json")
    }
}

enum ConfigSamples {
    static let spec = """
        {
          "listen": ["127.0.0.1:8080", "unix:/run/platform-proxy/proxy.sock"],
          "workers": 0,
          "allowedHosts": ["localhost", "127.0.0.1", "[::1]"],
          "apiKey": null,
          "stateDirectory": "state",
          "provider": {
            "discoveryURL": "https://idp.example/.well-known/openid-configuration",
            "authorizationEndpoint": null, "tokenEndpoint": null, "revocationEndpoint": null,
            "userinfoEndpoint": null, "deviceAuthorizationEndpoint": null,
            "clientID": "abc", "clientSecret": null,
            "redirectURI": "http://127.0.0.1:8080/_platform/callback",
            "scopes": ["openid", "read", "introspection"],
            "grant": "authorization_code",
            "refreshBeforeExpirySeconds": 60
          },
          "gate": { "mode": "reject", "waitSeconds": 10 },
          "limits": { "maxHeaderBytes": 32768, "maxBodyBytes": 104857600,
                      "retryBodyBytes": 1048576, "maxConnections": 10000,
                      "headerTimeoutSeconds": 10, "idleTimeoutSeconds": 60 },
          "routes": [
            { "name": "platform", "path": "/accounts/",
              "upstream": "https://platform.pennlabs.org/accounts/",
              "credential": "jwt",
              "headers": ["Authorization", "X-Authorization"],
              "redirects": { "follow": true, "max": 5, "credentialHosts": ["platform.pennlabs.org"] },
              "retryOn401": true, "timeoutSeconds": 30 },
            { "name": "users-mock", "path": "/Users/",
              "mock": { "directory": "MockJSON/Users", "mode": "replay" } }
          ],
          "analytics": {
            "root": "pennmobile",
            "endpoint": "https://analytics.pennlabs.org/analytics/",
            "credential": "access_token",
            "product": 1,
            "pushIntervalSeconds": 30, "expireIntervalSeconds": 604800,
            "bufferIntervalSeconds": 5, "maxBatch": 500, "maxStoredEvents": 100000
          }
        }
        """
}
