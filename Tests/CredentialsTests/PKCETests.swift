import Testing

@testable import Credentials

@Suite("PKCE (RFC 7636)")
struct PKCETests {
    @Test("RFC 7636 Appendix B: the example verifier gives the example challenge")
    func appendixB() {
        let pkce = PKCE(verifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
        #expect(pkce.challenge == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
        #expect(PKCE.method == "S256")
    }

    @Test("a generated verifier is 43 unreserved characters, fresh each time, with its matching challenge")
    func generated() {
        let a = PKCE.generate(), b = PKCE.generate()
        #expect(a.verifier.utf8.count == 43)
        #expect(
            a.verifier.utf8.allSatisfy { b in
                (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2D
                    || b == 0x5F
            })
        #expect(a != b)
        #expect(a.challenge == PKCE(verifier: a.verifier).challenge)
        #expect(a.challenge.utf8.count == 43)
    }

    @Test("random tokens carry the requested number of bytes")
    func randomTokens() {
        #expect(Base64URL.decode(randomToken())?.count == 32)
        #expect(Base64URL.decode(randomToken(bytes: 5))?.count == 5)
        #expect(Base64URL.decode(randomToken(bytes: 17))?.count == 17)
        #expect(randomToken(bytes: 0) == "")
        #expect(randomToken() != randomToken())
    }
}
