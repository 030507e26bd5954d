import JSON

/// The claims of a JWT (RFC 7519), read from its payload segment.
///
/// The signature is deliberately not verified: the proxy only reads claims from an
/// id_token it has just received itself from the token endpoint over verified TLS
/// (OIDC Core §3.1.3.7 lets such a client rely on TLS instead of the signature), and it
/// uses them for display and analytics only. It never accepts a JWT from a client, so
/// nothing here may ever gate access.
public struct JWTClaims: Sendable, Equatable {
    /// `sub`: the provider's identifier for the user.
    public let subject: String?
    /// `pennkey`: Penn's login name, preferred over `sub` where present.
    public let pennkey: String?
    /// `exp` in Unix seconds.
    public let expiresAt: Double?
    /// `iat` in Unix seconds.
    public let issuedAt: Double?
    /// `aud`, always as a list (RFC 7519 §4.1.3 allows a single string).
    public let audience: [String]
    /// Every claim of the payload, including the ones above.
    public let claims: JSONObject

    /// The name analytics records the user under: `pennkey`, else `sub`.
    public var analyticsSubject: String? { pennkey ?? subject }

    /// The claims of a compact JWS `header.payload.signature` (the signature may be empty,
    /// as for unsecured JWTs); nil unless the payload is base64url of a JSON object.
    /// Claims of the wrong type read as absent rather than failing the whole token.
    public static func decode(_ jwt: String) -> JWTClaims? {
        let segments = jwt.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        // Five segments would be an encrypted JWE, which the proxy cannot read.
        guard segments.count == 3, !segments[0].isEmpty, !segments[1].isEmpty,
            let payload = Base64Codec.decode(Array(segments[1])),
            let object = (try? JSONValue.parse(payload))?.objectValue
        else { return nil }
        return JWTClaims(claims: object)
    }

    /// Claims from a payload object already in hand.
    init(claims: JSONObject) {
        self.claims = claims
        subject = claims["sub"]?.stringValue
        pennkey = claims["pennkey"]?.stringValue
        expiresAt = claims["exp"]?.doubleValue
        issuedAt = claims["iat"]?.doubleValue
        switch claims["aud"] {
        case .string(let single)?: audience = [single]
        case .array(let list)?: audience = list.compactMap(\.stringValue)
        default: audience = []
        }
    }
}
