import JSON
import Testing

@testable import Credentials

@Suite("Token sets")
struct TokenSetTests {
    static let full = TokenSet(
        accessToken: "at-1", idToken: makeJWT(#"{"sub":"u1","pennkey":"jdoe"}"#), refreshToken: "rt-1",
        tokenType: "Bearer", expiresAt: 1_700_003_600.5, scope: "openid profile")

    @Test("json() and parse() round-trip, with and without optional fields")
    func roundTrip() {
        #expect(TokenSet.parse(Self.full.json()) == Self.full)
        let minimal = TokenSet(accessToken: "at")
        #expect(TokenSet.parse(minimal.json()) == minimal)
        #expect(String(decoding: minimal.json(), as: UTF8.self) == #"{"access_token":"at","token_type":"Bearer"}"#)
    }

    @Test("parse refuses what is not a token file")
    func parseRejects() {
        for text in [
            "", "{}", "[]", "null", #"{"access_token":1}"#, #"{"access_token":"a","expires_at":"x"}"#,
            #"{"access_token":"a","refresh_token":[]}"#, #"{"access_token":"a""#,
        ] {
            #expect(TokenSet.parse(Array(text.utf8)) == nil, "\(text)")
        }
        #expect(TokenSet.parse(Array(#"{"access_token":"a","id_token":null}"#.utf8)) == TokenSet(accessToken: "a"))
    }

    @Test("a token response (RFC 6749 §5.1) becomes a token set with an absolute expiry")
    func fromResponse() throws {
        let body: JSONValue = [
            "access_token": "at", "token_type": "bearer", "expires_in": 3600,
            "refresh_token": "rt", "id_token": "idt", "scope": "openid",
        ]
        let tokens = try TokenSet.fromTokenResponse(body, now: 1_000).get()
        #expect(
            tokens
                == TokenSet(
                    accessToken: "at", idToken: "idt", refreshToken: "rt",
                    tokenType: "Bearer", expiresAt: 4_600, scope: "openid"))
    }

    @Test("token_type is case-insensitive; expires_in is optional and may be a numeric string")
    func lenientFields() throws {
        let noExpiry = try TokenSet.fromTokenResponse(["access_token": "at", "token_type": "BEARER"], now: 5).get()
        #expect(noExpiry.tokenType == "Bearer")
        #expect(noExpiry.expiresAt == nil)
        #expect(noExpiry.refreshToken == nil)
        let stringExpiry = try TokenSet.fromTokenResponse(
            ["access_token": "at", "token_type": "Bearer", "expires_in": "60", "refresh_token": nil], now: 5
        ).get()
        #expect(stringExpiry.expiresAt == 65)
    }

    @Test(
        "unusable token responses are refused with a message that names no secret",
        arguments: [
            (JSONValue.array([]), "not an object"),
            (["token_type": "Bearer"], "no access_token"),
            (["access_token": "", "token_type": "Bearer"], "no access_token"),
            (["access_token": 5, "token_type": "Bearer"], "no access_token"),
            (["access_token": "secret-at"], "no token_type"),
            (["access_token": "secret-at", "token_type": "mac"], "unsupported token_type"),
            (["access_token": "secret-at", "token_type": "Bearer", "expires_in": -1], "expires_in"),
            (["access_token": "secret-at", "token_type": "Bearer", "expires_in": "soon"], "expires_in"),
            (["access_token": "secret-at", "token_type": "Bearer", "refresh_token": 7], "refresh_token"),
        ] as [(JSONValue, String)])
    func responseRejects(body: JSONValue, reason: String) {
        guard case .failure(let error) = TokenSet.fromTokenResponse(body, now: 0) else {
            Issue.record("accepted \(body.serialized())")
            return
        }
        #expect(error.description.contains(reason))
        #expect(!error.description.contains("secret"))
    }

    @Test("a refresh without refresh_token, id_token or scope keeps the old ones (docs/login.md)")
    func mergeKeeps() {
        let refreshed = Self.full.merging(refresh: TokenSet(accessToken: "at-2", expiresAt: 9))
        #expect(
            refreshed
                == TokenSet(
                    accessToken: "at-2", idToken: Self.full.idToken, refreshToken: "rt-1",
                    expiresAt: 9, scope: "openid profile"))
    }

    @Test("a refresh with new tokens replaces them")
    func mergeReplaces() {
        let response = TokenSet(
            accessToken: "at-2", idToken: "id-2", refreshToken: "rt-2", expiresAt: nil, scope: "openid")
        #expect(Self.full.merging(refresh: response) == response)
    }

    @Test("the subject comes from the id_token: pennkey, else sub, else nil")
    func subject() {
        #expect(Self.full.subject == "jdoe")
        #expect(TokenSet(accessToken: "a", idToken: makeJWT(#"{"sub":"u9"}"#)).subject == "u9")
        #expect(TokenSet(accessToken: "a", idToken: "opaque").subject == nil)
        #expect(TokenSet(accessToken: "a").subject == nil)
    }

    @Test("OAuth error bodies (RFC 6749 §5.2) are recognised; anything else is not")
    func errorBody() {
        let parsed = OAuthErrorBody.parse(Array(#"{"error":"invalid_grant","error_description":"expired"}"#.utf8))
        #expect(parsed?.error == "invalid_grant")
        #expect(parsed?.description == "expired")
        #expect(OAuthErrorBody.parse(Array(#"{"error":"server_error"}"#.utf8))?.description == nil)
        for text in ["<html>502</html>", "{}", #"{"error":5}"#, #"{"error":""}"#, "[]"] {
            #expect(OAuthErrorBody.parse(Array(text.utf8)) == nil, "\(text)")
        }
    }
}
