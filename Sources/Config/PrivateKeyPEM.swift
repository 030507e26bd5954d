import CCrypto

/// A PEM private key parsed by the system's OpenSSL libcrypto: what it can sign with, and the
/// signatures themselves. The key's bytes stay in libcrypto; nothing here prints them.
public final class PrivateKeyPEM: @unchecked Sendable {
    /// The JWS algorithms a key can sign with (RFC 7518 §3.1).
    public enum Algorithm: String, Sendable {
        case rs256 = "RS256"
        case es256 = "ES256"
    }

    private let key: UnsafeMutableRawPointer

    /// Parses `pem`; nil when it holds no private key.
    public init?(pem: String) {
        var bytes = Array(pem.utf8)
        guard let key = bytes.withUnsafeMutableBytes({ ccrypto_private_key($0.baseAddress, $0.count) }) else {
            return nil
        }
        self.key = key
    }

    deinit { ccrypto_free_key(key) }

    /// The algorithm this key signs client assertions with, or why it cannot: ES256 for an EC
    /// P-256 key, RS256 for an RSA key of 2048 bits or more.
    public var algorithm: Result<Algorithm, PrivateKeyProblem> {
        switch Int(ccrypto_key_kind(key)) {
        case Int(CCRYPTO_KEY_EC_P256): return .success(.es256)
        case Int(CCRYPTO_KEY_RSA):
            let bits = Int(ccrypto_key_bits(key))
            return bits >= 2048
                ? .success(.rs256)
                : .failure(PrivateKeyProblem("the RSA key has \(bits) bits; RS256 needs 2048 or more"))
        case Int(CCRYPTO_KEY_EC_OTHER):
            return .failure(
                PrivateKeyProblem("the EC key is not on P-256; ES256 needs a P-256 key (or use an RSA key for RS256)"))
        default:
            return .failure(
                PrivateKeyProblem(
                    "the key is neither RSA nor EC P-256; client assertions are signed with RS256 or ES256"))
        }
    }

    /// A SHA-256 signature of `data` in JWS form (RS256: PKCS#1 v1.5; ES256: r || s), or nil.
    public func sign(_ data: [UInt8]) -> [UInt8]? {
        var signature = [UInt8](repeating: 0, count: 1024)
        let length = data.withUnsafeBytes { input in
            signature.withUnsafeMutableBufferPointer { output in
                ccrypto_sign_sha256(key, input.baseAddress, input.count, output.baseAddress, output.count)
            }
        }
        guard length > 0 else { return nil }
        return Array(signature[..<length])
    }

    /// Whether `signature` (JWS form) is this key's SHA-256 signature of `data`.
    public func verify(_ data: [UInt8], signature: [UInt8]) -> Bool {
        data.withUnsafeBytes { input in
            signature.withUnsafeBufferPointer {
                ccrypto_verify_sha256(key, input.baseAddress, input.count, $0.baseAddress, $0.count) == 1
            }
        }
    }

    /// Whether the PEM certificate `pem` belongs to this key (nil: `pem` is not a certificate).
    public func matches(certificate pem: [UInt8]) -> Bool? {
        let result = pem.withUnsafeBytes { ccrypto_certificate_matches($0.baseAddress, $0.count, key) }
        return result < 0 ? nil : result == 1
    }
}

/// Why a private key cannot be used (never the key itself).
public struct PrivateKeyProblem: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
