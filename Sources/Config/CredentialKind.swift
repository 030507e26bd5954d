/// Which token a route (or the analytics uploader) sends upstream.
public enum CredentialKind: String, Sendable, Equatable, CaseIterable {
    /// The OAuth access token.
    case accessToken = "access_token"
    /// The OIDC id_token (a JWT).
    case jwt
    /// No credential: nothing is injected and the route is never gated.
    case none
}
