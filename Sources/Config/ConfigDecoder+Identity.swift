import JSON

/// Client authentication, audiences, token exchange and TLS (README "Service identity and
/// audiences"): the provider's and routes' keys for them.
extension ConfigDecoder {
    static let tlsKeys = ["caFile", "clientCertificate", "clientKey", "serverName"]
    /// The provider keys read by `identity`.
    static let identityKeys = [
        "tokenEndpointAuthMethod", "privateKey", "keyID", "clientAssertion", "resource", "audience", "tls",
    ]
    static let tokenExchangeKeys = ["audience", "resource", "scope"]

    /// Reads the provider's client-authentication, audience and TLS keys into `p` and checks
    /// that the method has what it needs (the secret, the key or assertion, the certificate).
    func identity(_ object: ObjectReader, into p: inout ProviderConfiguration) {
        p.tokenEndpointAuthMethod = object.choice("tokenEndpointAuthMethod")
        p.privateKey = object.secret("privateKey")
        p.keyID = object.read("keyID") { keyID($0, at: $1) }
        p.clientAssertion = object.secret("clientAssertion", token: true)
        if let resource = object.read("resource", resourceURIs) { p.resource = resource }
        p.audience = object.string("audience")
        p.tls = object.object("tls", keys: Self.tlsKeys).flatMap(tls)
        if object.has("tokenEndpointAuthMethod"), p.tokenEndpointAuthMethod == nil { return }

        let method = p.effectiveAuthMethod
        let named = "tokenEndpointAuthMethod \"\(method.rawValue)\""
        func unused(_ key: String) {
            if object.has(key) { report(object.path(key), "is not used with \(named)") }
        }
        switch method {
        case .clientSecretBasic, .clientSecretPost:
            if !object.has("clientSecret") { report(object.path("clientSecret"), "is required for \(named)") }
            unused("privateKey"); unused("clientAssertion")
        case .privateKeyJWT:
            switch (object.has("privateKey"), object.has("clientAssertion")) {
            case (false, false):
                report(
                    object.path,
                    "needs \"privateKey\" (signed assertions) or \"clientAssertion\" (a ready-made one) for \(named)")
            case (true, true):
                report(object.path("clientAssertion"), "cannot be used together with \"privateKey\" (give one of them)")
            default: break
            }
            unused("clientSecret")
            if object.has("keyID"), !object.has("privateKey") {
                report(object.path("keyID"), "is used only with \"privateKey\"")
            }
            if let source = p.privateKey, resolvesSecrets { checkSigningKey(source, at: object.path("privateKey")) }
        case .tlsClientAuth:
            if p.tls?.clientCertificate == nil, !object.has("tls") {
                report(object.path("tls"), "needs \"clientCertificate\" and \"clientKey\" for \(named)")
            } else if let tls = p.tls, tls.clientCertificate == nil {
                report(object.path("tls.clientCertificate"), "is required for \(named)")
            }
            unused("clientSecret"); unused("privateKey"); unused("clientAssertion")
        case .none:
            unused("clientSecret"); unused("privateKey"); unused("clientAssertion")
        }
        if object.has("keyID"), method != .privateKeyJWT {
            report(object.path("keyID"), "is used only with \"privateKey\"")
        }
    }

    /// A `kid`: visible ASCII (it goes into a JWS header as JSON, but keys are named plainly).
    private func keyID(_ value: JSONValue, at path: String) -> String? {
        guard let id = string(value, at: path) else { return nil }
        guard id.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return failure(path, "must be visible ASCII") }
        return id
    }

    /// Whether the private key in `source` parses and can sign an assertion (the message names
    /// what is wrong with it, never its bytes).
    private func checkSigningKey(_ source: SecretSource, at path: String) {
        guard let pem = try? source.resolve(at: path, environment: environment) else { return }
        guard let key = PrivateKeyPEM(pem: pem) else {
            return report(path, "is not a PEM private key (\(source.description)); expected an EC P-256 or RSA key")
        }
        if case .failure(let problem) = key.algorithm { report(path, problem.description) }
    }

    /// RFC 8707 resource indicators: absolute URIs without a fragment.
    func resourceURIs(_ value: JSONValue, at path: String) -> [String]? {
        guard let items = array(value, at: path) else { return nil }
        var uris: [String] = []
        for (itemPath, item) in items {
            guard let uri = string(item, at: itemPath) else { continue }
            if !Self.isAbsoluteURI(uri) {
                report(itemPath, "\"\(uri)\" is not an absolute URI (RFC 8707: a scheme, then the rest, no spaces)")
            } else if uri.utf8.contains(UInt8(ascii: "#")) {
                report(itemPath, "\"\(uri)\" has a fragment; RFC 8707 resource indicators must not")
            } else if !uris.contains(uri) {
                uris.append(uri)
            }
        }
        return uris
    }

    /// `scheme ":" rest` (RFC 3986 §3.1), visible ASCII only.
    static func isAbsoluteURI(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon > 0, colon < bytes.count - 1,
            bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        else { return false }
        let scheme = bytes[..<colon]
        func letter(_ b: UInt8) -> Bool { (b | 0x20) >= 0x61 && (b | 0x20) <= 0x7A }
        return letter(scheme[0])
            && scheme.allSatisfy { letter($0) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2B || $0 == 0x2D || $0 == 0x2E }
    }

    /// A `tls` object; files are checked to exist now, and a client key against its certificate.
    func tls(_ object: ObjectReader) -> TLSConfiguration? {
        let before = errors.count
        var tls = TLSConfiguration()
        tls.caFile = object.read("caFile") { readablePEM($0, at: $1) }
        tls.clientCertificate = object.read("clientCertificate") { readablePEM($0, at: $1) }
        tls.clientKey = object.secret("clientKey")
        tls.serverName = object.read("serverName") { serverName($0, at: $1) }
        switch (object.has("clientCertificate"), object.has("clientKey")) {
        case (true, false): report(object.path("clientKey"), "is required with \"clientCertificate\"")
        case (false, true): report(object.path("clientCertificate"), "is required with \"clientKey\"")
        default: break
        }
        if resolvesSecrets, let source = tls.clientKey, let certificate = tls.clientCertificate,
            let pem = try? source.resolve(at: object.path("clientKey"), environment: environment)
        {
            if let key = PrivateKeyPEM(pem: pem) {
                if case .success(let bytes) = FileSystem.readFile(certificate, limit: SecretSource.maxFileBytes),
                    key.matches(certificate: bytes) == false
                {
                    report(
                        object.path("clientKey"),
                        "does not match the certificate \(certificate) (\(source.description))")
                }
            } else {
                report(object.path("clientKey"), "is not a PEM private key (\(source.description))")
            }
        }
        return errors.count == before ? tls : nil
    }

    /// A file that exists and holds PEM text (a CA bundle or a certificate).
    private func readablePEM(_ value: JSONValue, at path: String) -> String? {
        guard let file = filePath(value, at: path) else { return nil }
        guard resolvesSecrets else { return file }
        switch FileSystem.readFile(file, limit: 16 << 20) {
        case .failure(let error): return failure(path, error.message)
        case .success(let bytes):
            guard String(decoding: bytes, as: UTF8.self).contains(text: "-----BEGIN CERTIFICATE-----") else {
                return failure(path, "\(file) holds no PEM certificate (\"-----BEGIN CERTIFICATE-----\")")
            }
            return file
        }
    }

    private func serverName(_ value: JSONValue, at path: String) -> String? {
        guard let name = string(value, at: path) else { return nil }
        guard HostSyntax.isRegName(name), !HostSyntax.isIPv4(name) else {
            return failure(path, "\"\(name)\" is not a DNS name")
        }
        return name.lowercased()
    }

    /// A route's `tokenExchange`: at least one of audience, resource and scope.
    func tokenExchange(_ object: ObjectReader) -> TokenExchangeConfiguration? {
        let before = errors.count
        var exchange = TokenExchangeConfiguration()
        exchange.audience = object.string("audience")
        if let resource = object.read("resource", resourceURIs) { exchange.resource = resource }
        if let scope = object.read("scope", scopes) { exchange.scope = scope }
        if !object.has("audience"), !object.has("resource"), !object.has("scope") {
            report(object.path, "needs \"audience\", \"resource\" or \"scope\": the token's target")
        }
        return errors.count == before ? exchange : nil
    }
}
