import JSON

/// One login's tokens, as stored in `tokens.json` and handed to the injector.
public struct TokenSet: Sendable, Equatable {
    /// The OAuth access token.
    public var accessToken: String
    /// The OIDC id_token (a JWT), if the provider issued one.
    public var idToken: String?
    /// The refresh token, if the provider issued one.
    public var refreshToken: String?
    /// The token type for the `Authorization` header; default `Bearer`.
    public var tokenType: String
    /// When the access token expires, in Unix seconds; nil when the provider did not say.
    public var expiresAt: Double?
    /// The granted scope, space-separated, if known.
    public var scope: String?

    /// A token set; only the access token is required.
    public init(
        accessToken: String, idToken: String? = nil, refreshToken: String? = nil,
        tokenType: String = "Bearer", expiresAt: Double? = nil, scope: String? = nil
    ) {
        self.accessToken = accessToken
        self.idToken = idToken
        self.refreshToken = refreshToken
        self.tokenType = tokenType
        self.expiresAt = expiresAt
        self.scope = scope
    }

    /// The set as a compact JSON object (the `tokens.json` format); absent fields are omitted.
    public func json() -> [UInt8] {
        var object = JSONObject()
        object["access_token"] = .string(accessToken)
        if let idToken { object["id_token"] = .string(idToken) }
        if let refreshToken { object["refresh_token"] = .string(refreshToken) }
        object["token_type"] = .string(tokenType)
        if let expiresAt { object["expires_at"] = .number(JSONNumber(expiresAt)) }
        if let scope { object["scope"] = .string(scope) }
        return JSONValue.object(object).serializedBytes()
    }

    /// A set from `json()` output; nil for anything else, which the store treats as corrupt.
    public static func parse(_ bytes: [UInt8]) -> TokenSet? {
        guard let object = (try? JSONValue.parse(bytes))?.objectValue,
            let accessToken = object["access_token"]?.stringValue
        else { return nil }
        // A member of the wrong type means the file is not ours: refuse it whole.
        func optional<T>(_ key: String, _ read: (JSONValue) -> T?) -> T?? {
            guard let value = object[key], !value.isNull else { return .some(nil) }
            return read(value).map { .some($0) }
        }
        guard let idToken = optional("id_token", \.stringValue),
            let refreshToken = optional("refresh_token", \.stringValue),
            let tokenType = optional("token_type", \.stringValue),
            let expiresAt = optional("expires_at", \.doubleValue),
            let scope = optional("scope", \.stringValue)
        else { return nil }
        return TokenSet(
            accessToken: accessToken, idToken: idToken, refreshToken: refreshToken,
            tokenType: tokenType ?? "Bearer", expiresAt: expiresAt, scope: scope)
    }

    /// This login updated by a refresh `response`. Providers that do not rotate refresh
    /// tokens omit `refresh_token` (RFC 6749 §6), and many omit `id_token` on refresh, so
    /// an absent one keeps the old value (docs/login.md); an absent `scope`
    /// means the scope granted before (RFC 6749 §5.1).
    public func merging(refresh response: TokenSet) -> TokenSet {
        var merged = response
        merged.refreshToken = response.refreshToken ?? refreshToken
        merged.idToken = response.idToken ?? idToken
        merged.scope = response.scope ?? scope
        return merged
    }

    /// The user, from the id_token's claims: `pennkey`, else `sub`; nil without an id_token.
    public var subject: String? {
        idToken.flatMap(JWTClaims.decode)?.analyticsSubject
    }
}
