/// A PKCE verifier and its S256 challenge (RFC 7636), one pair per authorization request.
public struct PKCE: Sendable, Equatable {
    /// The secret the token request proves possession of (`code_verifier`).
    public let verifier: String
    /// `BASE64URL(SHA256(ASCII(verifier)))`, sent with the authorization request (`code_challenge`).
    public let challenge: String
    /// The `code_challenge_method`; `plain` is never used, since it would leak the verifier.
    public static let method = "S256"

    /// A fresh pair: 32 random bytes make a 43-character verifier, 256 bits of entropy (RFC 7636 §4.1).
    public static func generate() -> PKCE {
        PKCE(verifier: randomToken(bytes: 32))
    }

    /// The pair for a known verifier (tests, and the RFC's own example).
    public init(verifier: String) {
        self.verifier = verifier
        challenge = Base64URL.encode(SHA256.hash(verifier.utf8))
    }
}

/// `bytes` random bytes from the system CSPRNG as unpadded base64url, for `state`, `nonce` and verifiers.
public func randomToken(bytes: Int = 32) -> String {
    var generator = SystemRandomNumberGenerator()
    var random: [UInt8] = []
    random.reserveCapacity(bytes)
    // SystemRandomNumberGenerator reads getrandom(2): unpredictable, never a seeded PRNG.
    while random.count < bytes {
        var word = generator.next()
        for _ in 0..<min(8, bytes - random.count) {
            random.append(UInt8(truncatingIfNeeded: word))
            word >>= 8
        }
    }
    return Base64URL.encode(random)
}
