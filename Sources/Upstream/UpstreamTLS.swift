import CCurl

/// TLS settings of one provider's or route's transfers, applied with libcurl's options on the
/// handle that sends them (`EasyHandle.setTLS`). One object per provider or route, made when
/// the config is loaded: handles compare them by identity, so a request whose handle last sent
/// for the same route sets nothing.
package final class UpstreamTLS: Sendable {
    /// PEM CA bundle trusted instead of the default (`CURL_CA_BUNDLE` or libcurl's own).
    package let caFile: String?
    /// PEM client certificate file (mutual TLS).
    package let clientCertificate: String?
    /// The certificate's PEM private key, held in memory and handed to libcurl as a blob (it is
    /// a secret: never written to a file by the proxy).
    package let clientKey: [UInt8]?
    /// The name the server's certificate is verified against and sent as SNI, instead of the
    /// URL's host; the connection still goes to the URL's host and port (`CURLOPT_CONNECT_TO`).
    package let serverName: String?

    /// TLS settings; nil fields keep libcurl's defaults.
    package init(caFile: String?, clientCertificate: String?, clientKey: [UInt8]?, serverName: String?) {
        self.caFile = caFile
        self.clientCertificate = clientCertificate
        self.clientKey = clientKey
        self.serverName = serverName
    }
}

extension EasyHandle {
    /// Applies `tls` (nil: the defaults), unless this handle's last request had the same object.
    /// libcurl keeps connections and TLS sessions apart by CA file and client certificate, so a
    /// pooled connection made for one route's settings is not reused for another's.
    func setTLS(_ tls: UpstreamTLS?) {
        guard tls !== appliedTLS else { return }
        appliedTLS = tls
        if let caFile = tls?.caFile {
            cc_easy_str(easy, CURLOPT_CAINFO, caFile)
        } else if let bundle = Self.caBundle ?? Self.defaultCAInfo {
            cc_easy_str(easy, CURLOPT_CAINFO, bundle)
        } else {
            cc_easy_ptr(easy, CURLOPT_CAINFO, nil)
        }
        if let certificate = tls?.clientCertificate { cc_easy_str(easy, CURLOPT_SSLCERT, certificate) } else { cc_easy_ptr(easy, CURLOPT_SSLCERT, nil) }
        if let key = tls?.clientKey {
            _ = key.withUnsafeBytes { cc_easy_sslkey_blob(easy, $0.baseAddress, $0.count) }
        } else {
            _ = cc_easy_sslkey_blob(easy, nil, 0)
        }
    }

    /// libcurl's built-in CA bundle path, to go back to after a route's own `caFile`.
    static let defaultCAInfo: String? = curl_version_info(CURLVERSION_TENTH).pointee.cainfo.map { String(cString: $0) }
}
