import Config
import Upstream

/// RFC 8693's names for a token exchange.
public enum TokenExchangeGrant {
    /// The grant type (RFC 8693 §2.1).
    public static let grantType = "urn:ietf:params:oauth:grant-type:token-exchange"
    /// The token type of an OAuth access token (RFC 8693 §3), both given and asked for.
    public static let accessTokenType = "urn:ietf:params:oauth:token-type:access_token"
}

extension UpstreamTLS {
    /// The transfer settings of a configured `tls`; the client key's secret is read now (an
    /// unreadable one leaves the certificate without its key, and the server refuses the handshake).
    /// `serverNameHost`: the host the server name stands for (a route's upstream host), nil for every host.
    public convenience init(configured tls: TLSConfiguration, serverNameHost: String? = nil) {
        self.init(
            caFile: tls.caFile, clientCertificate: tls.clientCertificate,
            clientKey: (try? tls.clientKey?.resolve()).map { Array($0.utf8) }, serverName: tls.serverName,
            serverNameHost: serverNameHost?.lowercased())
    }
}
