import Config
import JSON

/// The provider's endpoints: explicit config values override what OIDC discovery found.
public struct ProviderEndpoints: Sendable, Equatable {
    /// Where the user logs in (authorization code grant).
    public var authorization: UpstreamURL?
    /// Where tokens are issued and refreshed.
    public var token: UpstreamURL?
    /// RFC 7009 revocation.
    public var revocation: UpstreamURL?
    /// OIDC userinfo.
    public var userinfo: UpstreamURL?
    /// RFC 8628 device authorization.
    public var deviceAuthorization: UpstreamURL?

    /// The endpoints written in the config.
    public init(configured provider: ProviderConfiguration) {
        authorization = provider.authorizationEndpoint
        token = provider.tokenEndpoint
        revocation = provider.revocationEndpoint
        userinfo = provider.userinfoEndpoint
        deviceAuthorization = provider.deviceAuthorizationEndpoint
        // AM serves OAuth 2 per realm under its base URL; discovery or explicit values still win.
        if let journey = provider.journey, provider.discoveryURL == nil {
            authorization = authorization ?? journey.oauthEndpoint("authorize")
            token = token ?? journey.oauthEndpoint("access_token")
            revocation = revocation ?? journey.oauthEndpoint("token/revoke")
            userinfo = userinfo ?? journey.oauthEndpoint("userinfo")
        }
    }

    /// These endpoints with gaps filled from a discovery document; nil if it is not a JSON object.
    public func filled(fromDiscovery body: [UInt8]) -> ProviderEndpoints? {
        guard let document = try? JSONValue.parse(body), document.objectValue != nil else { return nil }
        func url(_ key: String) -> UpstreamURL? { document[key]?.stringValue.flatMap(UpstreamURL.parse) }
        var filled = self
        filled.authorization = authorization ?? url("authorization_endpoint")
        filled.token = token ?? url("token_endpoint")
        filled.revocation = revocation ?? url("revocation_endpoint")
        filled.userinfo = userinfo ?? url("userinfo_endpoint")
        filled.deviceAuthorization = deviceAuthorization ?? url("device_authorization_endpoint")
        return filled
    }
}
