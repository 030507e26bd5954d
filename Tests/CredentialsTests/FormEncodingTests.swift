import Testing

@testable import Credentials

@Suite("Form encoding and query decoding")
struct FormEncodingTests {
    @Test("unreserved characters pass, everything else is uppercase %XX of its UTF-8")
    func percentEncode() {
        #expect(FormEncoding.percentEncode("AZaz09-._~") == "AZaz09-._~")
        #expect(FormEncoding.percentEncode("a b+c&d=e/f?g#h%") == "a%20b%2Bc%26d%3De%2Ff%3Fg%23h%25")
        #expect(FormEncoding.percentEncode("é✓") == "%C3%A9%E2%9C%93")
        #expect(FormEncoding.percentEncode("*") == "%2A")
    }

    @Test("a token request body: pairs in order, separators inside values escaped")
    func encodePairs() {
        let body = FormEncoding.encode([
            ("grant_type", "authorization_code"), ("code", "a&b=c"),
            ("redirect_uri", "http://127.0.0.1:8080/_platform/callback"), ("scope", "openid profile"),
        ])
        #expect(
            body == "grant_type=authorization_code&code=a%26b%3Dc"
                + "&redirect_uri=http%3A%2F%2F127.0.0.1%3A8080%2F_platform%2Fcallback&scope=openid%20profile")
        #expect(FormEncoding.encode([]) == "")
    }

    @Test("decoding reverses encoding, in order, duplicates kept")
    func roundTrip() {
        let pairs = [("state", "x y+z"), ("code", "é&="), ("state", "")]
        let decoded = FormEncoding.decodeQuery(Substring(FormEncoding.encode(pairs)))
        #expect(decoded.map(\.0) == pairs.map(\.0))
        #expect(decoded.map(\.1) == pairs.map(\.1))
    }

    @Test("callback query: + is a space, lowercase hex works, a bare name has an empty value, empty parts skipped")
    func decodeQuery() {
        let decoded = FormEncoding.decodeQuery("code=a+b%2fc&&error_description=bad%20thing&flag")
        #expect(decoded.map(\.0) == ["code", "error_description", "flag"])
        #expect(decoded.map(\.1) == ["a b/c", "bad thing", ""])
        #expect(FormEncoding.decodeQuery("").isEmpty)
        #expect(FormEncoding.decodeQuery("a==b").first?.1 == "=b")
    }

    @Test("malformed escapes stay literal and invalid UTF-8 becomes U+FFFD rather than failing")
    func malformed() {
        let decoded = FormEncoding.decodeQuery("a=%zz%4&b=%ff%41&c=%")
        #expect(decoded.map(\.1) == ["%zz%4", "\u{FFFD}A", "%"])
    }
}
