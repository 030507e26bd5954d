import Config
import JSON

/// Why a token endpoint's success response (RFC 6749 §5.1) was unusable. The message
/// names fields, never their values, so it is safe for logs and `lastError`.
public struct TokenResponseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was wrong, e.g. "token response has no access_token".
    public let message: String

    /// An error with `message`.
    public init(_ message: String) { self.message = message }

    /// The message.
    public var description: String { message }
}

extension TokenSet {
    /// The token set in a successful token response (RFC 6749 §5.1), with `expires_in`
    /// turned into an absolute time from `now` (Unix seconds).
    public static func fromTokenResponse(_ body: JSONValue, now: Double) -> Result<TokenSet, TokenResponseError> {
        guard let object = body.objectValue else {
            return .failure(TokenResponseError("token response is \(body.kindDescription), not an object"))
        }
        guard let accessToken = object["access_token"]?.stringValue, !accessToken.isEmpty else {
            return .failure(TokenResponseError("token response has no access_token string"))
        }
        // A token that cannot go in a header (a space, a control or non-ASCII byte) would be
        // refused by every route: rejected here, where the reason can be told.
        guard SecretSource.isHeaderToken(accessToken) else {
            return .failure(
                TokenResponseError(
                    "token response has an access_token that cannot be sent in a header (a space, control or non-ASCII byte)"
                ))
        }
        guard let type = object["token_type"]?.stringValue else {
            return .failure(TokenResponseError("token response has no token_type string"))
        }
        // RFC 6749 §7.1: a client must not use a token whose type it does not understand,
        // and the proxy only knows how to present bearer tokens (RFC 6750).
        guard type.lowercased() == "bearer" else {
            return .failure(TokenResponseError("token response has unsupported token_type \"\(type)\""))
        }
        var expiresAt: Double?
        switch object["expires_in"] {
        case nil, .null?:
            expiresAt = nil
        case .number(let n)? where n.double.isFinite && n.double >= 0:
            expiresAt = now + n.double
        // Some providers (Azure AD v1 among them) send the number as a string.
        case .string(let s)? where Double(s).map { $0.isFinite && $0 >= 0 } == true:
            expiresAt = now + Double(s)!
        default:
            return .failure(TokenResponseError("token response has an invalid expires_in"))
        }
        var optional: [String: String] = [:]
        for key in ["refresh_token", "id_token", "scope"] {
            switch object[key] {
            case nil, .null?: continue
            case .string(let s)?: optional[key] = s
            default: return .failure(TokenResponseError("token response has a non-string \(key)"))
            }
        }
        if let idToken = optional["id_token"], !SecretSource.isHeaderToken(idToken) || idToken.isEmpty {
            return .failure(
                TokenResponseError(
                    "token response has an id_token that cannot be sent in a header (a space, control or non-ASCII byte)"
                ))
        }
        return .success(
            TokenSet(
                accessToken: accessToken, idToken: optional["id_token"], refreshToken: optional["refresh_token"],
                tokenType: "Bearer", expiresAt: expiresAt, scope: optional["scope"]))
    }
}
