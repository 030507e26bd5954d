import CCurl

/// TLS settings of one provider's or route's transfers, applied with libcurl's options on the
/// handle that sends them (`EasyHandle.setTLS`). One object per provider or route, made when
/// the config is loaded: handles compare them by identity, so a request whose handle last sent
/// for the same route sets nothing.
public final class UpstreamTLS: Sendable {
    /// PEM CA bundle trusted instead of the default (`CURL_CA_BUNDLE` or libcurl's own).
    public let caFile: String?
    /// PEM client certificate file (mutual TLS).
    public let clientCertificate: String?
    /// The certificate's PEM private key, held in memory and handed to libcurl as a blob (it is
    /// a secret: never written to a file by the proxy).
    public let clientKey: [UInt8]?
    /// The name the server's certificate is verified against and sent as SNI, instead of the
    /// URL's host; the connection still goes to the URL's host and port (`CURLOPT_CONNECT_TO`).
    public let serverName: String?
    /// The only host (as written in URLs, lowercased) `serverName` stands for: a route's
    /// upstream, so a redirect to another host is verified under that host's own name. Nil: every host.
    public let serverNameHost: String?

    /// TLS settings; nil fields keep libcurl's defaults.
    public init(
        caFile: String?, clientCertificate: String?, clientKey: [UInt8]?, serverName: String?,
        serverNameHost: String? = nil
    ) {
        self.caFile = caFile
        self.clientCertificate = clientCertificate
        self.clientKey = clientKey
        self.serverName = serverName
        self.serverNameHost = serverNameHost
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
        if let certificate = tls?.clientCertificate {
            cc_easy_str(easy, CURLOPT_SSLCERT, certificate)
        } else {
            cc_easy_ptr(easy, CURLOPT_SSLCERT, nil)
        }
        if let key = tls?.clientKey {
            _ = key.withUnsafeBytes { cc_easy_sslkey_blob(easy, $0.baseAddress, $0.count) }
        } else {
            _ = cc_easy_sslkey_blob(easy, nil, 0)
        }
    }

    /// libcurl's built-in CA bundle path, to go back to after a route's own `caFile`.
    static let defaultCAInfo: String? = curl_version_info(CURLVERSION_TENTH).pointee.cainfo.map { String(cString: $0) }
}

extension UpstreamTLS {
    /// For `serverName`: `target` with its host replaced by the server name (so libcurl sends it
    /// as SNI and verifies the certificate against it), and the `CURLOPT_CONNECT_TO` entry that
    /// still sends the connection to the original host and port. Nil without a server name, or
    /// for a URL without an authority, or on a host other than `serverNameHost`.
    func named(_ target: RequestURL) -> (target: RequestURL, connectTo: String)? {
        guard let serverName else { return nil }
        let bytes = Array(target.origin.utf8)
        func text(_ range: Range<Int>) -> String { String(decoding: bytes[range], as: UTF8.self) }
        // "scheme://" (no _StringProcessing: the bytes are searched by hand).
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon + 2 < bytes.count,
            bytes[colon + 1] == UInt8(ascii: "/"), bytes[colon + 2] == UInt8(ascii: "/")
        else { return nil }
        let scheme = text(0..<colon).lowercased()
        let start = colon + 3
        let end = bytes[start...].firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") } ?? bytes.count
        var hostEnd = end
        var port = scheme == "https" ? "443" : "80"
        if start < end, bytes[start] == UInt8(ascii: "[") {
            guard let close = bytes[start..<end].firstIndex(of: UInt8(ascii: "]")) else { return nil }
            hostEnd = close + 1
        } else if let portColon = bytes[start..<end].lastIndex(of: UInt8(ascii: ":")) {
            hostEnd = portColon
        }
        if hostEnd < end, bytes[hostEnd] == UInt8(ascii: ":") { port = text((hostEnd + 1)..<end) }
        let host = text(start..<hostEnd)
        if let serverNameHost, host.lowercased() != serverNameHost { return nil }
        let origin: String = scheme + "://" + serverName + ":" + port + text(end..<bytes.count)
        let connectTo: String = serverName + ":" + port + ":" + host + ":" + port
        return (RequestURL(origin: origin, path: target.path, query: target.query), connectTo)
    }
}

extension EasyHandle {
    /// Sets the request's `CURLOPT_CONNECT_TO` entry (nil: none), kept until the next call.
    func setConnectTo(_ entry: String?) {
        guard entry != nil || connectTo != nil else { return }
        curl_slist_free_all(connectTo)
        connectTo = entry.map { curl_slist_append(nil, $0) }
        cc_easy_slist(easy, CURLOPT_CONNECT_TO, connectTo)
    }
}
