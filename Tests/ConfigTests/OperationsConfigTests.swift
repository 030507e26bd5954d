import Testing

@testable import Config

/// The operator-facing pieces of the config: where it is found, the keys for running it, warnings.
struct OperationsConfigTests {
    @Test(
        "config lookup: --config, then PLATFORM_PROXY_CONFIG, then ./Config/…, then /etc/…",
        arguments: [
            // (explicit, environment, files that exist, expected path, expected source)
            ("a.json", "b.json", ["Config/platform-proxy.json"], "a.json", "--config"),
            (nil, "b.json", ["Config/platform-proxy.json"], "b.json", "PLATFORM_PROXY_CONFIG"),
            (
                nil, "", ["Config/platform-proxy.json", "/etc/platform-proxy/config.json"],
                "Config/platform-proxy.json", "default"
            ),
            (nil, nil, ["/etc/platform-proxy/config.json"], "/etc/platform-proxy/config.json", "default"),
            ("missing.json", nil, [], "missing.json", "--config"),
        ] as [(String?, String?, [String], String, String)])
    func lookupOrder(explicit: String?, environment: String?, existing: [String], path: String, source: String) throws {
        let found = try ConfigLocation.resolve(
            explicit: explicit, environment: { _ in environment },
            exists: { existing.contains($0) }
        ).get()
        #expect(found == ConfigLocation(path: path, source: source))
    }

    @Test("no config anywhere names what was tried")
    func nothingFound() {
        guard
            case .failure(let error) = ConfigLocation.resolve(
                explicit: nil, environment: { _ in nil }, exists: { _ in false })
        else {
            Issue.record("expected a failure")
            return
        }
        #expect(error.message.contains("./Config/platform-proxy.json and /etc/platform-proxy/config.json"))
    }

    @Test("metricsListen, shutdownGraceSeconds and watchConfig: defaults and values")
    func operationsKeys() throws {
        let defaults = try #require(validConfig("{}"))
        #expect(defaults.metricsListen == nil)
        #expect(defaults.shutdownGraceSeconds == 9)
        #expect(defaults.watchConfig == true)
        let set = try #require(
            validConfig(#"{"metricsListen": "0.0.0.0:9090", "shutdownGraceSeconds": 2.5, "watchConfig": false}"#))
        #expect(set.metricsListen == .tcp(host: "0.0.0.0", port: 9090))
        #expect(set.shutdownGraceSeconds == 2.5)
        #expect(set.watchConfig == false)
    }

    @Test("metricsListen must not reuse a listen address; ephemeral ports never clash")
    func metricsListenClash() {
        #expect(
            configErrors(#"{"listen": ["127.0.0.1:8080"], "metricsListen": "127.0.0.1:8080"}"#)
                == [#"metricsListen: 127.0.0.1:8080 is already a "listen" address; the metrics listener needs its own"#]
        )
        #expect(configErrors(#"{"listen": ["127.0.0.1:0"], "metricsListen": "127.0.0.1:0"}"#).isEmpty)
        #expect(configErrors(#"{"metricsListen": "nowhere"}"#).count == 1)
    }

    @Test("warnings: exposed listener without a key, demo under static, placeholder client ID")
    func warnings() throws {
        let exposed = try #require(validConfig(#"{"listen": ["0.0.0.0:8080", "127.0.0.1:8081", "unix:/tmp/p.sock"]}"#))
        #expect(ConfigWarnings.of(exposed).map(\.path) == ["listen[0]"])
        let keyed = try #require(validConfig(#"{"listen": ["0.0.0.0:8080"], "apiKey": "k"}"#))
        #expect(ConfigWarnings.of(keyed).isEmpty)
        let demo = try #require(
            validConfig(#"{"provider": {"grant": "static", "accessToken": "t", "demo": {"accessToken": "d"}}}"#))
        #expect(ConfigWarnings.of(demo).map(\.path) == ["provider.demo"])
        let placeholder = try #require(
            validConfig(
                """
                {"provider": {"clientID": "REPLACE_WITH_YOUR_PLATFORM_CLIENT_ID", "authorizationEndpoint": "https://i.example/a",
                 "tokenEndpoint": "https://i.example/t", "redirectURI": "http://127.0.0.1:8080/_platform/callback"}}
                """))
        #expect(ConfigWarnings.of(placeholder).map(\.path) == ["provider.clientID"])
        #expect(ConfigWarnings.of(try #require(validConfig("{}"))).isEmpty)
    }

    @Test("schema-only loading does not read secret files or variables")
    func schemaOnly() {
        let json = Array(
            #"{"apiKey": {"env": "PLATFORM_PROXY_UNSET_FOR_TEST"}, "provider": {"grant": "static", "accessToken": {"file": "/nonexistent/t"}}}"#
                .utf8)
        let full = ConfigLoader.parse(json, configDirectory: testDirectory, environment: { _ in nil })
        #expect((try? full.get()) == nil)
        let schema = ConfigLoader.parse(
            json, configDirectory: testDirectory, environment: { _ in nil }, schemaOnly: true)
        #expect((try? schema.get()) != nil)
    }
}
