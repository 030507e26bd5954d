import Testing

@testable import Config

struct JourneyConfigTests {
    static let base = #""grant": "journey", "clientID": "c", "redirectURI": "http://127.0.0.1:8080/_platform/callback""#

    static let bad: [(provider: String, errors: [String])] = [
        ("{\(base)}", ["provider.journey: is required for grant \"journey\""]),
        (
            #"{"grant": "journey", "journey": {"serverURL": "https://am.example/am"}}"#,
            [
                "provider.clientID: is required for grant \"journey\"",
                "provider.redirectURI: is required for grant \"journey\"",
            ]
        ),
        ("{\(base), \"journey\": {}}", ["provider.journey.serverURL: is required"]),
        (
            "{\(base), \"journey\": {\"serverURL\": \"https://am.example/am?x=1\"}}",
            ["provider.journey.serverURL: must not have a query"]
        ),
        (
            "{\(base), \"journey\": {\"serverURL\": \"https://am.example/am\", \"realm\": \"a/b\"}}",
            ["provider.journey.realm: \"a/b\" is not a realm name (letters, digits, \"-\", \"_\", \".\")"]
        ),
        (
            "{\(base), \"journey\": {\"serverURL\": \"https://am.example/am\", \"journey\": \"../x\"}}",
            ["provider.journey.journey: \"../x\" is not a journey name (letters, digits, \"-\", \"_\", \".\")"]
        ),
        (
            "{\(base), \"journey\": {\"serverURL\": \"https://am.example/am\", \"cookieName\": \"a b\"}}",
            ["provider.journey.cookieName: \"a b\" is not a valid cookie name"]
        ),
        (
            "{\(base), \"journey\": {\"serverURL\": \"https://am.example/am\", \"timeoutSeconds\": 0}}",
            ["provider.journey.timeoutSeconds: expected a number of seconds greater than 0, not 0"]
        ),
        (
            "{\(base), \"journey\": {\"serverURL\": \"https://am.example/am\", \"forceAuth\": \"yes\"}}",
            ["provider.journey.forceAuth: expected true or false, not a string"]
        ),
        (
            "{\(base), \"journey\": {\"serverURL\": \"https://am.example/am\", \"tree\": \"Login\"}}",
            ["provider.journey.tree: unknown key"]
        ),
        (
            #"{"clientID": "c", "tokenEndpoint": "https://i/t", "authorizationEndpoint": "https://i/a", "redirectURI": "http://127.0.0.1/cb", "journey": {"serverURL": "https://am.example/am"}}"#,
            ["provider.journey: is used only with grant \"journey\""]
        ),
    ]

    @Test("each bad journey provider yields exactly its expected errors", arguments: bad)
    func badJourneys(provider: String, expected: [String]) {
        #expect(configErrors("{\"provider\": \(provider)}") == expected)
    }

    @Test("a journey with only serverURL gets the documented defaults and no endpoints are needed")
    func defaults() throws {
        let config = try #require(
            validConfig("{\"provider\": {\(Self.base), \"journey\": {\"serverURL\": \"https://am.example/am\"}}}"))
        let journey = try #require(config.provider?.journey)
        #expect(config.provider?.grant == .journey)
        #expect(journey.realm == "root")
        #expect(journey.cookieName == "iPlanetDirectoryPro")
        #expect(journey.journey == "Login")
        #expect(!journey.forceAuth && !journey.noSession)
        #expect(journey.timeoutSeconds == 30)
        #expect(
            journey.url("/json" + journey.realmPath + "/authenticate").description
                == "https://am.example/am/json/realms/root/authenticate")
    }

    @Test("every journey field is read; a sub-realm's endpoints nest under realms/root/realms")
    func fullJourney() throws {
        let config = try #require(
            validConfig(
                """
                {"provider": {\(Self.base), "journey": {"serverURL": "https://t.example/am/", "realm": "alpha",
                  "cookieName": "6ac6499e9da2071", "journey": "OTP", "forceAuth": true, "noSession": true, "timeoutSeconds": 5}}}
                """))
        let journey = try #require(config.provider?.journey)
        #expect(journey.realm == "alpha")
        #expect(journey.cookieName == "6ac6499e9da2071")
        #expect(journey.journey == "OTP")
        #expect(journey.forceAuth && journey.noSession)
        #expect(journey.timeoutSeconds == 5)
        #expect(
            journey.oauthEndpoint("authorize").description
                == "https://t.example/am/oauth2/realms/root/realms/alpha/authorize")
    }
}

extension JourneyConfigTests {
    @Test("noSession with credentialed routes is warned about: such a journey never yields tokens")
    func noSessionWarning() throws {
        func config(noSession: Bool, credential: String) throws -> ProxyConfiguration {
            try #require(
                validConfig(
                    """
                    {"provider": {\(Self.base), "journey": {"serverURL": "https://am.test/am", "noSession": \(noSession)}},
                     "routes": [{"name": "api", "path": "/api/", "upstream": "https://api.test/", "credential": "\(credential)"}]}
                    """))
        }
        #expect(
            ConfigWarnings.of(try config(noSession: true, credential: "access_token")).map(\.path) == [
                "provider.journey.noSession"
            ])
        #expect(ConfigWarnings.of(try config(noSession: true, credential: "none")).isEmpty)
        #expect(ConfigWarnings.of(try config(noSession: false, credential: "access_token")).isEmpty)
    }
}
