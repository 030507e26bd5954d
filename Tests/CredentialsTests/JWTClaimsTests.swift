import JSON
import Testing

@testable import Credentials

/// An unsigned-looking JWT with `payload` as its claims segment.
func makeJWT(_ payload: String, signature: String = "c2ln") -> String {
    Base64URL.encode(Array(#"{"alg":"RS256","typ":"JWT"}"#.utf8)) + "." + Base64URL.encode(Array(payload.utf8)) + "."
        + signature
}

@Suite("JWT claims")
struct JWTClaimsTests {
    @Test("standard claims are read; pennkey wins over sub for analytics")
    func standardClaims() throws {
        let claims = try #require(
            JWTClaims.decode(
                makeJWT(
                    #"{"sub":"12345","pennkey":"jdoe","exp":1700003600,"iat":1700000000.5,"aud":"client-a","name":"J. Doe"}"#
                )))
        #expect(claims.subject == "12345")
        #expect(claims.pennkey == "jdoe")
        #expect(claims.expiresAt == 1_700_003_600)
        #expect(claims.issuedAt == 1_700_000_000.5)
        #expect(claims.audience == ["client-a"])
        #expect(claims.analyticsSubject == "jdoe")
        #expect(claims.claims["name"] == "J. Doe")
        #expect(claims.claims.count == 6)
    }

    @Test("without pennkey the subject is sub; aud may be a list")
    func subjectFallback() throws {
        let claims = try #require(JWTClaims.decode(makeJWT(#"{"sub":"u1","aud":["a","b"]}"#)))
        #expect(claims.analyticsSubject == "u1")
        #expect(claims.audience == ["a", "b"])
        #expect(claims.expiresAt == nil)
    }

    @Test("an empty signature segment is accepted (unsecured JWT shape)")
    func emptySignature() {
        #expect(JWTClaims.decode(makeJWT(#"{"sub":"u1"}"#, signature: ""))?.subject == "u1")
    }

    @Test("claims of the wrong type read as absent, the rest survive")
    func wrongTypes() throws {
        let claims = try #require(JWTClaims.decode(makeJWT(#"{"sub":5,"pennkey":null,"exp":"soon","aud":[1,"x"]}"#)))
        #expect(claims.subject == nil)
        #expect(claims.pennkey == nil)
        #expect(claims.expiresAt == nil)
        #expect(claims.audience == ["x"])
        #expect(claims.analyticsSubject == nil)
    }

    @Test(
        "not a JWT: wrong segment count, bad base64, non-object or invalid JSON payload",
        arguments: [
            "", "abc", "a.b", "a.b.c.d.e", ".\(Base64URL.encode(Array("{}".utf8))).",
            "eyJ9.***.sig",
            "eyJ9.\(Base64URL.encode(Array("[1]".utf8))).sig",
            "eyJ9.\(Base64URL.encode(Array("{\"sub\":".utf8))).sig",
        ])
    func rejects(token: String) {
        #expect(JWTClaims.decode(token) == nil)
    }
}
