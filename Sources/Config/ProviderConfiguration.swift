/// The OAuth 2 / OIDC provider that issues the proxy's tokens.
package struct ProviderConfiguration: Sendable, Equatable {
    /// How tokens are obtained.
    package enum Grant: String, Sendable, Equatable, CaseIterable {
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
    package var discoveryURL: UpstreamURL?
    /// Authorization endpoint (overrides discovery). Default nil.
    package var authorizationEndpoint: UpstreamURL?
    /// Token endpoint (overrides discovery). Default nil.
    package var tokenEndpoint: UpstreamURL?
    /// RFC 7009 revocation endpoint (overrides discovery). Default nil.
    package var revocationEndpoint: UpstreamURL?
    /// OIDC userinfo endpoint (overrides discovery). Default nil.
    package var userinfoEndpoint: UpstreamURL?
    /// RFC 8628 device authorization endpoint (overrides discovery). Default nil.
    package var deviceAuthorizationEndpoint: UpstreamURL?
    /// OAuth client ID; required unless the grant is static. Default nil.
    package var clientID: String?
    /// OAuth client secret; required for client_credentials. Default nil.
    package var clientSecret: SecretSource?
    /// Redirect URI registered with the provider; required for authorization_code. Default nil.
    package var redirectURI: UpstreamURL?
    /// Scopes requested. Default ["openid"].
    package var scopes: [String]
    /// How tokens are obtained. Default `.authorizationCode`.
    package var grant: Grant
    /// Seconds before expiry at which a token is refreshed. Default 60.
    package var refreshBeforeExpirySeconds: Double
    /// Seconds a token must have been in use before an upstream 401 may refresh it (and so at most one such refresh per interval). Default 30.
    package var minRefreshIntervalSeconds: Double
    /// Static grant only: the access token (required there). Default nil.
    package var accessToken: SecretSource?
    /// Static grant only: the id_token. Default nil.
    package var idToken: SecretSource?
    /// Token type put before the token in injected headers. Default "Bearer".
    package var tokenType: String
    /// Token set installed by `POST /_platform/login/demo`; nil disables that endpoint. Default nil.
    package var demo: DemoTokens?
    /// Journey grant only: the AM tree and server (required there). Default nil.
    package var journey: JourneyConfiguration?
    /// How the client authenticates at the token endpoint; nil: `effectiveAuthMethod` decides. Default nil.
    package var tokenEndpointAuthMethod: TokenEndpointAuthMethod?
    /// `private_key_jwt`: the PEM private key (EC P-256 or RSA) client assertions are signed with. Default nil.
    package var privateKey: SecretSource?
    /// `private_key_jwt`: the `kid` header of signed assertions. Default nil.
    package var keyID: String?
    /// `private_key_jwt`: a ready-made assertion, read again for every token request (a rotated
    /// projected token is picked up), used instead of signing one. Default nil.
    package var clientAssertion: SecretSource?
    /// RFC 8707 `resource` parameters on token requests (absolute URIs). Default [].
    package var resource: [String] = []
    /// The `audience` parameter on token requests. Default nil.
    package var audience: String?
    /// TLS for this provider's calls (CA, client certificate, server name). Default nil.
    package var tls: TLSConfiguration?

    /// The client authentication in force: the configured one, else `client_secret_basic` with
    /// a secret, `private_key_jwt` with a key or assertion, `none` without any.
    package var effectiveAuthMethod: TokenEndpointAuthMethod {
        if let tokenEndpointAuthMethod { return tokenEndpointAuthMethod }
        if clientSecret != nil { return .clientSecretBasic }
        if privateKey != nil || clientAssertion != nil { return .privateKeyJWT }
        return .none
    }

    /// A provider with the documented defaults unless given.
    package init(
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
package struct DemoTokens: Sendable, Equatable {
    /// The demo access token. Required.
    package var accessToken: SecretSource
    /// The demo id_token. Default nil.
    package var idToken: SecretSource?
    /// Seconds until the demo login expires. Default 3600.
    package var expiresInSeconds: Double

    /// A demo token set.
    package init(accessToken: SecretSource, idToken: SecretSource? = nil, expiresInSeconds: Double = 3600) {
        self.accessToken = accessToken
        self.idToken = idToken
        self.expiresInSeconds = expiresInSeconds
    }
}
