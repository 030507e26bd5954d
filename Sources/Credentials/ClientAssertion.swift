import Config
import JSON

/// RFC 7523 §2.2 client assertions: a JWT the client signs for each token request, proving its
/// identity with a private key instead of a shared secret.
public enum ClientAssertion {
    /// `client_assertion_type` for a JWT (RFC 7523 §2.2).
    public static let type = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    /// Seconds an assertion is valid: long enough for one request, short enough that a copy is
    /// soon worthless.
    public static let lifetime = 60.0

    /// A signed assertion: `iss` = `sub` = the client ID, `aud` = the token endpoint, a fresh
    /// `jti`, `iat` now and `exp` a minute later; `kid` in the header when given. Nil when
    /// libcrypto could not sign.
    public static func sign(
        clientID: String, audience: String, key: PrivateKeyPEM, algorithm: PrivateKeyPEM.Algorithm,
        keyID: String?, now: Double, jti: String = randomToken(bytes: 16)
    ) -> String? {
        var header = JSONObject()
        header["alg"] = .string(algorithm.rawValue)
        header["typ"] = .string("JWT")
        if let keyID { header["kid"] = .string(keyID) }
        var claims = JSONObject()
        let issued = now.rounded(.down)
        claims["iss"] = .string(clientID)
        claims["sub"] = .string(clientID)
        claims["aud"] = .string(audience)
        claims["jti"] = .string(jti)
        claims["iat"] = .number(JSONNumber(issued))
        claims["exp"] = .number(JSONNumber(issued + lifetime))
        let input =
            Base64URL.encode(JSONValue.object(header).serializedBytes()) + "."
            + Base64URL.encode(JSONValue.object(claims).serializedBytes())
        guard let signature = key.sign(Array(input.utf8)) else { return nil }
        return input + "." + Base64URL.encode(signature)
    }
}

/// The client's credentials on each request to the token, revocation and device endpoints, by
/// `tokenEndpointAuthMethod`. The key and a ready-made assertion are read again for every
/// request (token requests are rare), so a rotated key file or projected token is used at once.
final class ClientAuthenticator {
    let method: TokenEndpointAuthMethod
    private let clientID: String?
    /// Never sent anywhere but the token endpoint; also taken out of its error texts (`SecretRedaction`).
    let clientSecret: String?
    private let privateKey: SecretSource?
    private let keyID: String?
    private let assertion: SecretSource?
    /// The last key parsed, and the PEM it came from (parsed again only when the file changed).
    private var parsed: (pem: String, key: PrivateKeyPEM, algorithm: PrivateKeyPEM.Algorithm)?

    init(provider: ProviderConfiguration, clientSecret: String?) {
        method = provider.effectiveAuthMethod
        clientID = provider.clientID
        self.clientSecret = clientSecret
        privateKey = provider.privateKey
        keyID = provider.keyID
        assertion = provider.clientAssertion
    }

    /// The header lines and form parameters that authenticate one request to `tokenEndpoint`
    /// (the assertion's audience), or why they cannot be made (never a secret in the reason).
    func credentials(tokenEndpoint: String, now: Double) -> Result<
        (headers: [String], form: [(String, String)]), OAuthFailure
    > {
        var form: [(String, String)] = []
        switch method {
        case .clientSecretBasic:
            guard let clientID, let clientSecret else {
                return .failure(.refused("client_secret_basic needs clientID and clientSecret"))
            }
            let pair = FormEncoding.percentEncode(clientID) + ":" + FormEncoding.percentEncode(clientSecret)
            return .success((["Authorization: Basic " + Base64.encode(Array(pair.utf8))], []))
        case .clientSecretPost:
            if let clientID { form.append(("client_id", clientID)) }
            if let clientSecret { form.append(("client_secret", clientSecret)) }
        case .privateKeyJWT:
            if let clientID { form.append(("client_id", clientID)) }
            switch assertionValue(tokenEndpoint: tokenEndpoint, now: now) {
            case .success(let value):
                form.append(("client_assertion_type", ClientAssertion.type))
                form.append(("client_assertion", value))
            case .failure(let failure): return .failure(failure)
            }
        case .tlsClientAuth, .none:
            if let clientID { form.append(("client_id", clientID)) }
        }
        return .success(([], form))
    }

    private func assertionValue(tokenEndpoint: String, now: Double) -> Result<String, OAuthFailure> {
        if let assertion {
            do { return .success(try assertion.resolveToken()) } catch {
                return .failure(
                    .unavailable("the client assertion (\(assertion.description)) cannot be read: \(error.message)"))
            }
        }
        guard let privateKey, let clientID else {
            return .failure(.refused("private_key_jwt needs privateKey or clientAssertion"))
        }
        let pem: String
        do { pem = try privateKey.resolve() } catch {
            return .failure(
                .unavailable("the private key (\(privateKey.description)) cannot be read: \(error.message)"))
        }
        if parsed?.pem != pem {
            guard let key = PrivateKeyPEM(pem: pem) else {
                return .failure(.unavailable("the private key (\(privateKey.description)) is not a PEM private key"))
            }
            switch key.algorithm {
            case .success(let algorithm): parsed = (pem, key, algorithm)
            case .failure(let problem):
                return .failure(.unavailable("the private key (\(privateKey.description)): \(problem)"))
            }
        }
        guard let parsed,
            let signed = ClientAssertion.sign(
                clientID: clientID, audience: tokenEndpoint, key: parsed.key,
                algorithm: parsed.algorithm, keyID: keyID, now: now)
        else {
            return .failure(.unavailable("libcrypto could not sign the client assertion"))
        }
        return .success(signed)
    }
}
