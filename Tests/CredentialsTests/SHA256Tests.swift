import Testing

@testable import Credentials

/// Lowercase hex, for comparing digests with published vectors.
func hex(_ bytes: [UInt8]) -> String {
    let digits = Array("0123456789abcdef")
    return String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0F)]] })
}

@Suite("SHA-256 (FIPS 180-4)")
struct SHA256Tests {
    @Test(
        "NIST vectors: empty, abc, 448-bit and 896-bit messages",
        arguments: [
            ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            (
                "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
                "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
            ),
            (
                "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
                "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"
            ),
        ])
    func nistVectors(message: String, digest: String) {
        #expect(hex(SHA256.hash(message.utf8)) == digest)
    }

    @Test("one million 'a' (NIST long message)")
    func millionA() {
        let message = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        #expect(hex(SHA256.hash(message)) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test("padding boundaries: 55, 56, 63, 64 and 65 bytes, contiguous or not, agree")
    func paddingBoundaries() {
        // 55 bytes is the longest tail that fits one padding block; 56 needs two.
        let expected = [
            55: "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318",
            56: "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a",
            64: "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb",
        ]
        for (count, digest) in expected {
            let message = [UInt8](repeating: UInt8(ascii: "a"), count: count)
            #expect(hex(SHA256.hash(message)) == digest, "length \(count)")
            // A lazy sequence takes the copying path; it must agree with the contiguous one.
            #expect(SHA256.hash(message.lazy.map { $0 }) == SHA256.hash(message))
        }
        #expect(SHA256.hash(repeatElement(UInt8(7), count: 63)).count == 32)
        #expect(SHA256.hash(repeatElement(UInt8(7), count: 65)) != SHA256.hash(repeatElement(UInt8(7), count: 64)))
    }
}
