/// TLS settings for one provider's calls (token, discovery, userinfo, revocation) or one
/// route's upstream: whom to trust, which client certificate to show, which name to verify.
/// Each applies to that provider's or route's transfers only; `CURL_CA_BUNDLE` stays the
/// process-wide default of the CA file.
public struct TLSConfiguration: Sendable, Equatable {
    /// A PEM file of CA certificates trusted instead of the default ones. Default nil.
    public var caFile: String?
    /// A PEM client certificate (chain) file shown to the server: mutual TLS, and RFC 8705
    /// `tls_client_auth` at a token endpoint. Needs `clientKey`. Default nil.
    public var clientCertificate: String?
    /// The certificate's PEM private key, a secret (usually `{"file": …}`). Needs `clientCertificate`. Default nil.
    public var clientKey: SecretSource?
    /// The name the server's certificate is verified against and sent as SNI, when it is not
    /// the URL's host (an upstream reached by IP address or an internal alias). Default nil.
    public var serverName: String?

    /// TLS settings; every field defaults to nil.
    public init(
        caFile: String? = nil, clientCertificate: String? = nil, clientKey: SecretSource? = nil,
        serverName: String? = nil
    ) {
        self.caFile = caFile
        self.clientCertificate = clientCertificate
        self.clientKey = clientKey
        self.serverName = serverName
    }
}
