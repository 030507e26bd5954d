/// The OAuth 2 / OIDC provider that issues the proxy's tokens.
public struct ProviderConfiguration: Sendable, Equatable {
    /// How tokens are obtained.
    public enum Grant: String, Sendable, Equatable, CaseIterable {
        /// User login with PKCE S256.
        case authorizationCode = "authorization_code"
        /// Service identity: client ID and secret, no login.
        case clientCredentials = "client_credentials"
        /// Tokens given in the config (`accessToken`, `idToken`); no endpoints.
        case staticTokens = "static"
        /// An AM authentication tree walked step by step, then authorize (PKCE S256) and token.
        case journey
    }

    /// OIDC discovery document; fills any endpoint not given by hand. Default nil.
    public var discoveryURL: UpstreamURL?
    /// Authorization endpoint (overrides discovery). Default nil.
    public var authorizationEndpoint: UpstreamURL?
    /// Token endpoint (overrides discovery). Default nil.
    public var tokenEndpoint: UpstreamURL?
    /// RFC 7009 revocation endpoint (overrides discovery). Default nil.
    public var revocationEndpoint: UpstreamURL?
    /// OIDC userinfo endpoint (overrides discovery). Default nil.
    public var userinfoEndpoint: UpstreamURL?
    /// RFC 8628 device authorization endpoint (overrides discovery). Default nil.
    public var deviceAuthorizationEndpoint: UpstreamURL?
    /// OAuth client ID; required unless the grant is static. Default nil.
    public var clientID: String?
    /// OAuth client secret; required for client_credentials. Default nil.
    public var clientSecret: SecretSource?
    /// Redirect URI registered with the provider; required for authorization_code. Default nil.
    public var redirectURI: UpstreamURL?
    /// Scopes requested. Default ["openid"].
    public var scopes: [String]
    /// How tokens are obtained. Default `.authorizationCode`.
    public var grant: Grant
    /// Seconds before expiry at which a token is refreshed. Default 60.
    public var refreshBeforeExpirySeconds: Double
    /// Seconds a token must have been in use before an upstream 401 may refresh it (and so at most one such refresh per interval). Default 30.
    public var minRefreshIntervalSeconds: Double
    /// Static grant only: the access token (required there). Default nil.
    public var accessToken: SecretSource?
    /// Static grant only: the id_token. Default nil.
    public var idToken: SecretSource?
    /// Token type put before the token in injected headers. Default "Bearer".
    public var tokenType: String
    /// Token set installed by `POST /_platform/login/demo`; nil disables that endpoint. Default nil.
    public var demo: DemoTokens?
    /// Journey grant only: the AM tree and server (required there). Default nil.
    public var journey: JourneyConfiguration?
    /// How the client authenticates at the token endpoint; nil: `effectiveAuthMethod` decides. Default nil.
    public var tokenEndpointAuthMethod: TokenEndpointAuthMethod?
    /// `private_key_jwt`: the PEM private key (EC P-256 or RSA) client assertions are signed with. Default nil.
    public var privateKey: SecretSource?
    /// `private_key_jwt`: the `kid` header of signed assertions. Default nil.
    public var keyID: String?
    /// `private_key_jwt`: a ready-made assertion, read again for every token request (a rotated
    /// projected token is picked up), used instead of signing one. Default nil.
    public var clientAssertion: SecretSource?
    /// RFC 8707 `resource` parameters on token requests (absolute URIs). Default [].
    public var resource: [String] = []
    /// The `audience` parameter on token requests. Default nil.
    public var audience: String?
    /// TLS for this provider's calls (CA, client certificate, server name). Default nil.
    public var tls: TLSConfiguration?

    /// The client authentication in force: the configured one, else `client_secret_basic` with
    /// a secret, `private_key_jwt` with a key or assertion, `none` without any.
    public var effectiveAuthMethod: TokenEndpointAuthMethod {
        if let tokenEndpointAuthMethod { return tokenEndpointAuthMethod }
        if clientSecret != nil { return .clientSecretBasic }
        if privateKey != nil || clientAssertion != nil { return .privateKeyJWT }
        return .none
    }

    /// A provider with the documented defaults unless given.
    public init(
        grant: Grant = .authorizationCode, discoveryURL: UpstreamURL? = nil,
        authorizationEndpoint: UpstreamURL? = nil, tokenEndpoint: UpstreamURL? = nil,
        revocationEndpoint: UpstreamURL? = nil, userinfoEndpoint: UpstreamURL? = nil,
        deviceAuthorizationEndpoint: UpstreamURL? = nil, clientID: String? = nil,
        clientSecret: SecretSource? = nil, redirectURI: UpstreamURL? = nil, scopes: [String] = ["openid"],
        refreshBeforeExpirySeconds: Double = 60, accessToken: SecretSource? = nil,
        idToken: SecretSource? = nil, tokenType: String = "Bearer", demo: DemoTokens? = nil,
        minRefreshIntervalSeconds: Double = 30
    ) {
        self.minRefreshIntervalSeconds = minRefreshIntervalSeconds
        self.grant = grant
        self.discoveryURL = discoveryURL
        self.authorizationEndpoint = authorizationEndpoint
        self.tokenEndpoint = tokenEndpoint
        self.revocationEndpoint = revocationEndpoint
        self.userinfoEndpoint = userinfoEndpoint
        self.deviceAuthorizationEndpoint = deviceAuthorizationEndpoint
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.redirectURI = redirectURI
        self.scopes = scopes
        self.refreshBeforeExpirySeconds = refreshBeforeExpirySeconds
        self.accessToken = accessToken
        self.idToken = idToken
        self.tokenType = tokenType
        self.demo = demo
    }
}

/// The token set `POST /_platform/login/demo` installs (store reviewers, CI).
public struct DemoTokens: Sendable, Equatable {
    /// The demo access token. Required.
    public var accessToken: SecretSource
    /// The demo id_token. Default nil.
    public var idToken: SecretSource?
    /// Seconds until the demo login expires. Default 3600.
    public var expiresInSeconds: Double

    /// A demo token set.
    public init(accessToken: SecretSource, idToken: SecretSource? = nil, expiresInSeconds: Double = 3600) {
        self.accessToken = accessToken
        self.idToken = idToken
        self.expiresInSeconds = expiresInSeconds
    }
}
