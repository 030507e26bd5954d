import Testing

@testable import Config

private let platform =
    #"{"clientID": "p", "discoveryURL": "https://idp/d", "redirectURI": "http://127.0.0.1:8080/_platform/callback"}"#
private let ping =
    #"{"grant": "client_credentials", "clientID": "c", "clientSecret": "s", "tokenEndpoint": "https://ping/t"}"#
private let staticOne = #"{"grant": "static", "accessToken": "t"}"#

private func route(_ name: String, _ extra: String = "", credential: String = "access_token") -> String {
    #"{"name": ""# + name + #"", "path": "/"# + name + #"/", "upstream": "https://api.example/", "credential": ""#
        + credential + "\"" + extra + "}"
}

struct ProvidersConfigTests {
    static let bad: [(config: String, errors: [String])] = [
        (
            "{\"provider\": \(staticOne), \"providers\": {\"a\": \(staticOne)}}",
            ["providers: cannot be used together with \"provider\" (use one of them)"]
        ),
        (#"{"providers": {}}"#, ["providers: must name at least one provider"]),
        (#"{"providers": []}"#, ["providers: expected an object of named providers, not an array"]),
        (
            "{\"providers\": {\"bad name\": \(staticOne)}}",
            ["providers[\"bad name\"]: a provider name has 1 to 32 letters, digits, '_' or '-'"]
        ),
        (
            "{\"providers\": {\"\": \(staticOne)}}",
            ["providers[\"\"]: must not be empty"]
        ),
        (
            "{\"providers\": {\"a\": {\"grant\": \"static\"}}}",
            ["providers.a.accessToken: is required for grant \"static\""]
        ),
        (
            "{\"providers\": {\"platform\": \(platform), \"ping\": \(ping)}, \"routes\": [\(route("x"))]}",
            ["routes[0].provider: is required: several providers are configured (\"platform\", \"ping\")"]
        ),
        (
            "{\"providers\": {\"platform\": \(platform), \"ping\": \(ping)}, \"routes\": [\(route("x", #", "provider": "nope""#))]}",
            ["routes[0].provider: names an unknown provider \"nope\" (configured: \"platform\", \"ping\")"]
        ),
        (
            "{\"routes\": [\(route("x", #", "provider": "nope""#))]}",
            ["routes[0].provider: names \"nope\", but no provider is configured"]
        ),
        (
            "{\"providers\": {\"platform\": \(platform), \"ping\": \(ping)}, \"analytics\": {\"root\": \"r\", \"endpoint\": \"https://a/e\"}}",
            ["analytics.provider: is required: several providers are configured (\"platform\", \"ping\")"]
        ),
        (
            "{\"providers\": {\"platform\": \(platform), \"ping\": \(ping)}, \"routes\": [\(route("x", #", "provider": "ping""#, credential: "jwt"))]}",
            ["routes[0].credential: \"jwt\" needs an id_token, which grant \"client_credentials\" does not give"]
        ),
        (
            "{\"providers\": {\"s\": {\"grant\": \"static\", \"accessToken\": \"t\"}}, \"routes\": [\(route("x", credential: "jwt"))]}",
            ["routes[0].credential: \"jwt\" needs providers.s.idToken with grant \"static\""]
        ),
    ]

    @Test("each bad providers config in the table yields exactly its expected errors", arguments: bad)
    func badConfigs(config: String, expected: [String]) {
        #expect(configErrors(config) == expected)
    }

    @Test("several providers keep file order and each route and analytics name theirs")
    func routesPickTheirProvider() throws {
        let config = try #require(
            validConfig(
                """
                {"providers": {"platform": \(platform), "ping": \(ping)},
                 "routes": [\(route("a", #", "provider": "ping""#)), \(route("b", #", "provider": "platform""#)),
                            {"name": "open", "path": "/open/", "upstream": "https://open.example/"}],
                 "analytics": {"root": "r", "endpoint": "https://a/e", "provider": "platform"}}
                """))
        #expect(config.providers.map(\.name) == ["platform", "ping"])
        #expect(config.providers.map(\.path) == ["providers.platform", "providers.ping"])
        #expect(config.routes.map(\.provider) == ["ping", "platform", nil])
        #expect(config.analytics?.provider == "platform")
        // No provider is named "default": the first one answers the top-level fields.
        #expect(config.defaultProvider?.name == "platform")
    }

    @Test("the single provider key is one provider named default, chosen by every credentialed route")
    func singleProviderIsDefault() throws {
        let config = try #require(validConfig("{\"provider\": \(staticOne), \"routes\": [\(route("a"))]}"))
        #expect(config.providers.map(\.name) == ["default"])
        #expect(config.routes[0].provider == "default")
    }

    @Test("one entry under providers needs no route.provider")
    func oneNamedProviderIsImplicit() throws {
        let config = try #require(validConfig("{\"providers\": {\"ping\": \(ping)}, \"routes\": [\(route("a"))]}"))
        #expect(config.routes[0].provider == "ping")
    }

    @Test("token store files: tokens.json for default, tokens-NAME.json for the others")
    func tokenFileNames() {
        let provider = ProviderConfiguration(grant: .staticTokens)
        #expect(NamedProvider(name: "default", configuration: provider).tokenFileName == "tokens.json")
        #expect(NamedProvider(name: "ping", configuration: provider).tokenFileName == "tokens-ping.json")
        #expect(
            NamedProvider(name: "ping", configuration: provider).journeySessionFileName == "journey-session-ping.json")
    }

    @Test("warnings name the provider's own JSON path, and an unused one of several")
    func warningsNameTheProvider() throws {
        let placeholder =
            #"{"clientID": "your-client-id", "discoveryURL": "https://idp/d", "redirectURI": "http://127.0.0.1:8080/cb"}"#
        let config = try #require(validConfig("{\"providers\": {\"platform\": \(platform), \"ping\": \(placeholder)}}"))
        #expect(
            ConfigWarnings.of(config).map(\.path) == [
                "providers.platform", "providers.ping", "providers.ping.clientID",
            ])
        let used = try #require(
            validConfig(
                """
                {"providers": {"platform": \(platform), "ping": \(ping)},
                 "routes": [\(route("a", #", "provider": "ping""#))],
                 "analytics": {"root": "r", "endpoint": "https://a/e", "provider": "platform"}}
                """))
        #expect(ConfigWarnings.of(used).isEmpty)
    }
}
