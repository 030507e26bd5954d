import Foundation
import Testing

@testable import Config

/// A throwaway key or certificate made by the openssl command, written into `directory`.
private func openssl(_ arguments: [String]) throws {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["openssl"] + arguments
    process.standardOutput = Pipe()
    process.standardError = Pipe()
    try process.run()
    process.waitUntilExit()
    #expect(process.terminationStatus == 0, "openssl \(arguments)")
}

struct ServiceIdentityConfigTests {
    static let service = #""grant": "client_credentials", "clientID": "svc", "tokenEndpoint": "https://idp.test/token""#

    func provider(_ members: String, env: [String: String] = [:], directory: String = testDirectory) -> [String] {
        configErrors(#"{"provider": {\#(Self.service), \#(members)}}"#, env: env, directory: directory)
    }

    @Test func theAuthMethodFollowsWhatIsGiven() throws {
        func method(_ members: String) -> TokenEndpointAuthMethod? {
            validConfig(#"{"provider": {\#(Self.service), \#(members)}}"#)?.provider?.effectiveAuthMethod
        }
        #expect(method(#""clientSecret": "s""#) == .clientSecretBasic)
        #expect(method(#""clientSecret": "s", "tokenEndpointAuthMethod": "client_secret_post""#) == .clientSecretPost)
        #expect(method(#""clientAssertion": "a.b.c""#) == .privateKeyJWT)
    }

    @Test func resourceAudienceAndTokenExchangeAreRead() throws {
        let config = try #require(
            validConfig(
                #"""
                {"provider": {\#(Self.service), "clientSecret": "s", "resource": ["https://a.test/", "urn:x:y", "https://a.test/"],
                              "audience": "apis"},
                 "routes": [{"name": "o", "path": "/o/", "upstream": "https://o.test/", "credential": "access_token",
                             "tokenExchange": {"audience": "orders", "resource": ["https://o.test/"], "scope": ["read", "write"]}}]}
                """#))
        #expect(config.provider?.resource == ["https://a.test/", "urn:x:y"])
        #expect(config.provider?.audience == "apis")
        #expect(
            config.routes[0].tokenExchange
                == TokenExchangeConfiguration(
                    audience: "orders", resource: ["https://o.test/"],
                    scope: ["read", "write"]))
    }

    static let bad: [(members: String, errors: [String])] = [
        (
            #""tokenEndpointAuthMethod": "client_secret_jwt""#,
            [
                #"provider.tokenEndpointAuthMethod: expected "client_secret_basic", "client_secret_post", "private_key_jwt", "tls_client_auth" or "none", not "client_secret_jwt""#
            ]
        ),
        (
            #""tokenEndpointAuthMethod": "private_key_jwt""#,
            [
                #"provider: needs "privateKey" (signed assertions) or "clientAssertion" (a ready-made one) for tokenEndpointAuthMethod "private_key_jwt""#
            ]
        ),
        (
            #""tokenEndpointAuthMethod": "client_secret_post""#,
            [#"provider.clientSecret: is required for tokenEndpointAuthMethod "client_secret_post""#]
        ),
        (
            #""tokenEndpointAuthMethod": "tls_client_auth""#,
            [#"provider.tls: needs "clientCertificate" and "clientKey" for tokenEndpointAuthMethod "tls_client_auth""#]
        ),
        (
            #""tokenEndpointAuthMethod": "none""#,
            [
                #"provider.tokenEndpointAuthMethod: "none" cannot be used with grant "client_credentials": the client must authenticate"#
            ]
        ),
        (
            #""clientSecret": "s", "clientAssertion": "a.b.c""#,
            [#"provider.clientAssertion: is not used with tokenEndpointAuthMethod "client_secret_basic""#]
        ),
        (
            #""clientSecret": "s", "keyID": "k""#,
            [#"provider.keyID: is used only with "privateKey""#]
        ),
        (
            #""clientSecret": "s", "resource": ["relative/path", "https://a.test/#frag"]"#,
            [
                #"provider.resource[0]: "relative/path" is not an absolute URI (RFC 8707: a scheme, then the rest, no spaces)"#,
                #"provider.resource[1]: "https://a.test/#frag" has a fragment; RFC 8707 resource indicators must not"#,
            ]
        ),
        (
            #""clientSecret": "s", "tls": {"clientKey": "k", "serverName": "not a name"}"#,
            [
                #"provider.tls.serverName: "not a name" is not a DNS name"#,
                #"provider.tls.clientCertificate: is required with "clientKey""#,
            ]
        ),
    ]

    @Test(arguments: bad) func badIdentityKeysAreNamed(members: String, errors: [String]) {
        #expect(provider(members) == errors)
    }

    @Test func retryOn401WithTokenExchangeIsAWarning() throws {
        let config = try #require(
            validConfig(
                #"""
                {"provider": {\#(Self.service), "clientSecret": "s"},
                 "routes": [{"name": "o", "path": "/o/", "upstream": "https://o.test/", "credential": "access_token", "retryOn401": true,
                             "tokenExchange": {"audience": "orders"}}]}
                """#))
        #expect(
            ConfigWarnings.of(config).map(\.description)
                == [
                    "routes[0].retryOn401: ignored with tokenExchange: the route's token is exchanged for it, and a refresh of the provider's would not change it"
                ])
    }

    @Test func aStaticProviderTakesNoIdentityKeys() {
        let errors = configErrors(#"{"provider": {"grant": "static", "accessToken": "t", "audience": "a", "tls": {}}}"#)
        #expect(
            errors == [
                #"provider.audience: is not used with grant "static" (it calls no token endpoint)"#,
                #"provider.tls: is not used with grant "static" (it calls no token endpoint)"#,
            ])
    }

    @Test func tokenExchangeNeedsAnAccessTokenRouteAndATarget() {
        let errors = configErrors(
            #"""
            {"provider": {\#(Self.service), "clientSecret": "s"},
             "routes": [{"name": "a", "path": "/a/", "upstream": "https://a.test/", "credential": "jwt", "tokenExchange": {"audience": "x"}},
                        {"name": "b", "path": "/b/", "upstream": "https://b.test/", "credential": "access_token", "tokenExchange": {}}]}
            """#)
        #expect(
            errors.contains(
                #"routes[0].tokenExchange: needs "credential": "access_token" (the token exchanged is the provider's access token)"#
            ))
        #expect(
            errors.contains(#"routes[1].tokenExchange: needs "audience", "resource" or "scope": the token's target"#))
        let staticErrors = configErrors(
            #"""
            {\#(staticProvider), "routes": [{"name": "a", "path": "/a/", "upstream": "https://a.test/", "credential": "access_token",
                                             "tokenExchange": {"audience": "x"}}]}
            """#)
        #expect(
            staticErrors == [
                #"routes[0].tokenExchange: needs a provider with a token endpoint; provider has grant "static""#
            ])
    }

    @Test func keysAndCertificatesAreCheckedWithoutShowingThem() throws {
        let directory = try makeTemporaryDirectory()
        defer { removeTemporaryDirectory(directory) }
        try openssl([
            "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384", "-out", directory + "/p384.key",
        ])
        try openssl([
            "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", directory + "/p256.key",
        ])
        try openssl([
            "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", directory + "/rsa.key",
        ])
        try openssl([
            "req", "-x509", "-key", directory + "/p256.key", "-out", directory + "/p256.pem", "-days", "1", "-subj",
            "/CN=t",
        ])
        let p384 = try String(contentsOfFile: directory + "/p384.key", encoding: .utf8)
        let env = ["P384": p384]

        #expect(provider(#""privateKey": {"file": "p256.key"}, "keyID": "k""#, directory: directory).isEmpty)
        #expect(provider(#""privateKey": {"file": "rsa.key"}"#, directory: directory).isEmpty)
        let wrongCurve = provider(#""privateKey": {"env": "P384"}"#, env: env, directory: directory)
        #expect(
            wrongCurve == [
                "provider.privateKey: the EC key is not on P-256; ES256 needs a P-256 key (or use an RSA key for RS256)"
            ])
        let notAKey = provider(#""privateKey": {"file": "p256.pem"}"#, directory: directory)
        #expect(
            notAKey == [
                "provider.privateKey: is not a PEM private key (file \(directory)/p256.pem); expected an EC P-256 or RSA key"
            ])
        let tls =
            #""tokenEndpointAuthMethod": "tls_client_auth", "tls": {"clientCertificate": "p256.pem", "clientKey": {"file": "%@"}}"#
        #expect(provider(tls.replacingOccurrences(of: "%@", with: "p256.key"), directory: directory).isEmpty)
        let mismatch = provider(tls.replacingOccurrences(of: "%@", with: "rsa.key"), directory: directory)
        #expect(
            mismatch == [
                "provider.tls.clientKey: does not match the certificate \(directory)/p256.pem (file \(directory)/rsa.key)"
            ])
        let caNotPEM = provider(#""clientSecret": "s", "tls": {"caFile": "rsa.key"}"#, directory: directory)
        #expect(
            caNotPEM == [
                #"provider.tls.caFile: \#(directory)/rsa.key holds no PEM certificate ("-----BEGIN CERTIFICATE-----")"#
            ])
        for line in wrongCurve + notAKey + mismatch {
            #expect(!line.contains(p384.split(separator: "\n")[1]))
        }
    }
}
