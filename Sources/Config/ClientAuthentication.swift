/// How the proxy authenticates itself at the token endpoint, named as OIDC's
/// `token_endpoint_auth_method` (OpenID Connect Core §9, RFC 8705 §2.1).
public enum TokenEndpointAuthMethod: String, Sendable, Equatable, CaseIterable {
    /// `clientSecret` in HTTP Basic (RFC 6749 §2.3.1).
    case clientSecretBasic = "client_secret_basic"
    /// `clientSecret` as the `client_secret` form parameter.
    case clientSecretPost = "client_secret_post"
    /// A JWT client assertion (RFC 7523 §2.2): signed per request with `privateKey`, or the
    /// ready-made `clientAssertion` (a projected Kubernetes service-account token).
    case privateKeyJWT = "private_key_jwt"
    /// The TLS client certificate of the provider's `tls` (RFC 8705 §2.1).
    case tlsClientAuth = "tls_client_auth"
    /// A public client: `client_id` only.
    case none
}

/// An RFC 8693 token exchange a route asks for: its provider's access token is exchanged for
/// one meant for this route's upstream alone.
public struct TokenExchangeConfiguration: Sendable, Equatable, Hashable {
    /// The `audience` parameter (the logical name of the target service). Default nil.
    public var audience: String?
    /// `resource` parameters (RFC 8707): absolute URIs of the target service. Default [].
    public var resource: [String]
    /// The `scope` asked for; empty sends none. Default [].
    public var scope: [String]

    /// An exchange; at least one of the three should be given (the decoder requires it).
    public init(audience: String? = nil, resource: [String] = [], scope: [String] = []) {
        self.audience = audience
        self.resource = resource
        self.scope = scope
    }
}
