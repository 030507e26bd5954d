import JSON

extension ConfigDecoder {
    static let providerKeys =
        [
            "discoveryURL", "authorizationEndpoint", "tokenEndpoint", "revocationEndpoint", "userinfoEndpoint",
            "deviceAuthorizationEndpoint", "clientID", "clientSecret", "redirectURI", "scopes", "grant",
            "refreshBeforeExpirySeconds", "minRefreshIntervalSeconds", "accessToken", "idToken", "tokenType", "demo",
            "journey",
        ] + identityKeys

    /// The provider; nil when anything in it is invalid (reported), so dependent checks stay quiet.
    func provider(_ object: ObjectReader) -> ProviderConfiguration? {
        let before = errors.count
        var p = ProviderConfiguration()
        let chosenGrant: ProviderConfiguration.Grant? = object.choice("grant")
        if let chosenGrant { p.grant = chosenGrant }
        p.discoveryURL = object.url("discoveryURL")
        p.authorizationEndpoint = object.url("authorizationEndpoint")
        p.tokenEndpoint = object.url("tokenEndpoint")
        p.revocationEndpoint = object.url("revocationEndpoint")
        p.userinfoEndpoint = object.url("userinfoEndpoint")
        p.deviceAuthorizationEndpoint = object.url("deviceAuthorizationEndpoint")
        p.clientID = object.string("clientID")
        p.clientSecret = object.secret("clientSecret")
        p.redirectURI = object.url("redirectURI")
        if let scopes = object.read("scopes", scopes) { p.scopes = scopes }
        if let lead = object.seconds("refreshBeforeExpirySeconds") { p.refreshBeforeExpirySeconds = lead }
        if let interval = object.seconds("minRefreshIntervalSeconds") { p.minRefreshIntervalSeconds = interval }
        p.accessToken = object.secret("accessToken", token: true)
        p.idToken = object.secret("idToken", token: true)
        if let type = object.read("tokenType", tokenType) { p.tokenType = type }
        p.demo = object.object("demo", keys: ["accessToken", "idToken", "expiresInSeconds"]).flatMap(demo)
        p.journey = object.object("journey", keys: Self.journeyKeys).flatMap(journey)
        if p.grant != .staticTokens { identity(object, into: &p) }

        // An invalid grant was reported; guessing one would only add confusing errors.
        if object.has("grant"), chosenGrant == nil { return nil }
        let grant = "grant \"\(p.grant.rawValue)\""
        func require(_ key: String, _ condition: Bool) {
            if !condition, !object.has(key) { report(object.path(key), "is required for \(grant)") }
        }
        switch p.grant {
        case .staticTokens:
            require("accessToken", p.accessToken != nil)
            // No token endpoint is called: client authentication, audiences and TLS have nothing to apply to.
            for key in Self.identityKeys where object.has(key) {
                report(object.path(key), "is not used with grant \"static\" (it calls no token endpoint)")
            }
        case .authorizationCode, .clientCredentials, .journey:
            require("clientID", p.clientID != nil)
            for key in ["accessToken", "idToken"] where object.has(key) {
                report(object.path(key), "is used only with grant \"static\"")
            }
            // A journey's OAuth endpoints default to AM's own under serverURL and realm.
            if p.grant != .journey, !object.has("discoveryURL"), !object.has("tokenEndpoint") {
                report(object.path, "needs \"discoveryURL\" or \"tokenEndpoint\" for \(grant)")
            }
        }
        if p.grant == .authorizationCode {
            if !object.has("discoveryURL"), !object.has("authorizationEndpoint") {
                report(object.path, "needs \"discoveryURL\" or \"authorizationEndpoint\" for \(grant)")
            }
            require("redirectURI", p.redirectURI != nil)
        }
        if p.grant == .journey {
            require("journey", p.journey != nil)
            require("redirectURI", p.redirectURI != nil)
        } else if object.has("journey") {
            report(object.path("journey"), "is used only with grant \"journey\"")
        }
        // An invalid tokenEndpointAuthMethod was reported; what it needs is unknown.
        let methodKnown = !object.has("tokenEndpointAuthMethod") || p.tokenEndpointAuthMethod != nil
        if p.grant == .clientCredentials, methodKnown, p.effectiveAuthMethod == .none {
            // A service has no user: it must prove itself (a secret, a key, an assertion or a certificate).
            if p.tokenEndpointAuthMethod == nil {
                require("clientSecret", false)
            } else {
                report(
                    object.path("tokenEndpointAuthMethod"),
                    "\"none\" cannot be used with \(grant): the client must authenticate")
            }
        }
        return errors.count == before ? p : nil
    }

    /// RFC 6749 scope tokens: printable ASCII without space, '"' or '\'.
    func scopes(_ value: JSONValue, at path: String) -> [String]? {
        guard let items = array(value, at: path) else { return nil }
        var scopes: [String] = []
        for (itemPath, item) in items {
            guard let scope = string(item, at: itemPath) else { continue }
            let valid = scope.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != 0x22 && $0 != 0x5C }
            if !valid {
                report(itemPath, "\"\(scope)\" is not a valid scope (no spaces, quotes or backslashes)")
            } else if !scopes.contains(scope) {
                scopes.append(scope)
            }
        }
        return scopes
    }

    private func tokenType(_ value: JSONValue, at path: String) -> String? {
        guard let type = string(value, at: path) else { return nil }
        guard HostSyntax.isToken(type) else { return failure(path, "\"\(type)\" is not a valid token type") }
        return type
    }

    private func demo(_ object: ObjectReader) -> DemoTokens? {
        let access = object.secret("accessToken", required: true, token: true)
        let id = object.secret("idToken", token: true)
        let expires = object.seconds("expiresInSeconds", positive: true) ?? 3600
        return access.map { DemoTokens(accessToken: $0, idToken: id, expiresInSeconds: expires) }
    }
}
