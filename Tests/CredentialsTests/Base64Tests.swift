import Testing

@testable import Credentials

@Suite("Base64 and base64url (RFC 4648)")
struct Base64Tests {
    static let vectors: [(String, String)] = [
        ("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy"),
    ]

    @Test("RFC 4648 §10 vectors, standard alphabet, padded")
    func standardVectors() {
        for (plain, encoded) in Self.vectors {
            #expect(Base64.encode(Array(plain.utf8)) == encoded)
        }
    }

    @Test("RFC 4648 §10 vectors, base64url: encoded unpadded, decoded with or without padding")
    func urlVectors() {
        for (plain, padded) in Self.vectors {
            let unpadded = String(padded.filter { $0 != "=" })
            #expect(Base64URL.encode(Array(plain.utf8)) == unpadded)
            #expect(Base64URL.decode(unpadded) == Array(plain.utf8))
            #expect(Base64URL.decode(padded) == Array(plain.utf8))
        }
    }

    @Test("the url alphabet uses - and _ where the standard one uses + and /")
    func alphabets() {
        let bytes: [UInt8] = [0xFB, 0xFF, 0xBF]
        #expect(Base64.encode(bytes) == "+/+/")
        #expect(Base64URL.encode(bytes) == "-_-_")
        #expect(Base64URL.decode("-_-_") == bytes)
    }

    @Test("every byte value round-trips at every length modulo 3")
    func roundTrip() {
        let all = (0...255).map(UInt8.init)
        for length in 250...256 {
            let bytes = Array(all.prefix(length))
            #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes)
        }
    }

    @Test(
        "invalid input is refused, not guessed at",
        arguments: [
            "Zm9v+", "Zm9/", "Zm 9v", "Zm9v\n", "Z", "Zm9vY", "Zg=", "Zg===", "====", "Z===", "Zm=v", "=Zm9",
            "Zm9v====", "Zé",
        ])
    func rejects(text: String) {
        #expect(Base64URL.decode(text) == nil)
    }

    @Test("a Substring decodes like a String")
    func substring() {
        let token = "aaa.Zm9vYmFy.ccc"
        let middle = token.split(separator: ".")[1]
        #expect(Base64URL.decode(middle) == Array("foobar".utf8))
    }
}
