import JSON

extension ConfigDecoder {
    static let topLevelKeys = [
        "listen", "workers", "allowedHosts", "apiKey", "stateDirectory", "mock",
        "provider", "providers", "gate", "limits", "routes", "analytics",
        "metricsListen", "shutdownGraceSeconds", "watchConfig", "log",
        "experiments",
        "maskEchoedCredentials",
    ]

    /// The whole document; nil only when the root is not an object (reported).
    func proxyConfiguration(_ root: JSONValue) -> ProxyConfiguration? {
        guard case .object = root else {
            return failure("", "the config must be a JSON object, not \(root.kindDescription)")
        }
        guard let top = ObjectReader(root, at: "", keys: ConfigDecoder.topLevelKeys, decoder: self) else { return nil }
        var config = ProxyConfiguration(configDirectory: directory)
        if let listen = top.read("listen", listenAddresses) { config.listen = listen }
        config.metricsListen = top.read("metricsListen") { value, path in
            metricsAddress(value, at: path, listen: config.listen)
        }
        if let grace = top.seconds("shutdownGraceSeconds") { config.shutdownGraceSeconds = grace }
        if let watch = top.bool("watchConfig") { config.watchConfig = watch }
        if let log = top.object("log", keys: ["access"]), let access = log.bool("access") { config.accessLog = access }
        if let workers = top.integer("workers", in: 0...1024) { config.workers = workers }
        if let hosts = top.read("allowedHosts", allowedHosts) { config.allowedHosts = hosts }
        config.apiKey = top.secret("apiKey")
        if let state = top.read("stateDirectory", filePath) { config.stateDirectory = state }
        if let mock = top.bool("mock") { config.mock = mock }
        if let mask = top.bool("maskEchoedCredentials") { config.maskEchoedCredentials = mask }
        let named = providers(top)
        config.providers = named.valid
        if let gate = top.object("gate", keys: ["mode", "waitSeconds"]).map(gate) { config.gate = gate }
        if let limits = top.object("limits", keys: ConfigDecoder.limitsKeys).map(limits) { config.limits = limits }
        let routes = top.read("routes", routes) ?? []
        config.routes = routes.map(\.route)
        config.analytics = top.object("analytics", keys: ConfigDecoder.analyticsKeys).flatMap(analytics)
        config.experiments = top.read("experiments", experiments) ?? []

        // Credentials need a provider able to issue them; skip when a provider itself was invalid.
        if named.anyInvalid { return config }
        for (index, (route, path)) in routes.enumerated() where route.credential != .none || route.provider != nil {
            let chosen = chooseProvider(route.provider, credential: route.credential, at: path, in: config)
            config.routes[index].provider = chosen?.name
            if route.tokenExchange != nil, let chosen, chosen.configuration.grant == .staticTokens {
                report(
                    path + ".tokenExchange",
                    "needs a provider with a token endpoint; \(chosen.path) has grant \"static\"")
            }
        }
        if let analytics = config.analytics, analytics.credential != .none || analytics.provider != nil {
            let chosen = chooseProvider(
                analytics.provider, credential: analytics.credential, at: "analytics", in: config)
            config.analytics?.provider = chosen?.name
        }
        return config
    }

    /// The provider a route (or analytics) at `path` uses: the one it names, else the only one.
    private func chooseProvider(
        _ name: String?, credential: CredentialKind, at path: String,
        in config: ProxyConfiguration
    ) -> NamedProvider? {
        let known = config.providers.map { "\"\($0.name)\"" }.joined(separator: ", ")
        let chosen: NamedProvider
        if let name {
            guard let found = config.provider(named: name) else {
                return failure(
                    path + ".provider",
                    config.providers.isEmpty
                        ? "names \"\(name)\", but no provider is configured"
                        : "names an unknown provider \"\(name)\" (configured: \(known))")
            }
            chosen = found
        } else if config.providers.count == 1 {
            chosen = config.providers[0]
        } else if config.providers.isEmpty {
            return failure(path + ".credential", "needs a provider")
        } else {
            return failure(path + ".provider", "is required: several providers are configured (\(known))")
        }
        if credential != .none { checkCredential(credential, at: path + ".credential", provider: chosen) }
        return chosen
    }

    /// `provider` (one, named "default") or `providers` (named); both at once is an error.
    private func providers(_ top: ObjectReader) -> (valid: [NamedProvider], anyInvalid: Bool) {
        if top.has("provider"), top.has("providers") {
            report(top.path("providers"), "cannot be used together with \"provider\" (use one of them)")
        }
        if top.has("provider") {
            guard let single = top.object("provider", keys: ConfigDecoder.providerKeys).flatMap(provider) else {
                return ([], true)
            }
            return ([NamedProvider(name: NamedProvider.defaultName, configuration: single, path: "provider")], false)
        }
        guard let value = top.value("providers") else { return ([], false) }
        guard case .object(let members) = value else {
            let _: Void? = mismatch(value, at: top.path("providers"), expected: "an object of named providers")
            return ([], true)
        }
        if members.isEmpty { report(top.path("providers"), "must name at least one provider") }
        var valid: [NamedProvider] = []
        var anyInvalid = members.isEmpty
        for (name, block) in members {
            let path = ConfigDecoder.path(top.path("providers"), name)
            guard providerName(.string(name), at: path) != nil else {
                anyInvalid = true
                continue
            }
            guard let reader = ObjectReader(block, at: path, keys: ConfigDecoder.providerKeys, decoder: self),
                let configuration = provider(reader)
            else {
                anyInvalid = true
                continue
            }
            valid.append(NamedProvider(name: name, configuration: configuration, path: path))
        }
        return (valid, anyInvalid)
    }

    /// A provider name: 1 to 32 letters, digits, '_' or '-' (it names a file, a metric label, a query value).
    func providerName(_ value: JSONValue, at path: String) -> String? {
        guard let name = string(value, at: path) else { return nil }
        let allowed =
            name.utf8.count <= 32
            && name.utf8.allSatisfy { b in
                (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A)
                    || b == UInt8(ascii: "-") || b == UInt8(ascii: "_")
            }
        guard allowed else { return failure(path, "a provider name has 1 to 32 letters, digits, '_' or '-'") }
        return name
    }

    private func checkCredential(_ kind: CredentialKind, at path: String, provider named: NamedProvider) {
        let provider = named.configuration
        guard kind == .jwt else { return }
        switch provider.grant {
        case .clientCredentials:
            report(path, "\"jwt\" needs an id_token, which grant \"client_credentials\" does not give")
        case .staticTokens where provider.idToken == nil:
            report(path, "\"jwt\" needs \(named.path).idToken with grant \"static\"")
        case .authorizationCode where !provider.scopes.contains("openid"),
            .journey where !provider.scopes.contains("openid"):
            report(path, "\"jwt\" needs the \"openid\" scope in \(named.path).scopes")
        default:
            break
        }
    }

    func listenAddresses(_ value: JSONValue, at path: String) -> [ListenAddress]? {
        guard let items = array(value, at: path) else { return nil }
        guard !items.isEmpty else { return failure(path, "must list at least one address") }
        var addresses: [ListenAddress] = []
        for (itemPath, item) in items {
            guard let text = string(item, at: itemPath) else { continue }
            switch ListenAddress.validate(text, relativeTo: directory) {
            case .success(let address) where addresses.contains(address):
                report(itemPath, "\(address) is listed twice")
            case .success(let address):
                addresses.append(address)
            case .failure(let refusal):
                report(itemPath, "\"\(text)\" is not a listen address: \(refusal.reason)")
            }
        }
        return addresses
    }

    /// The metrics-only listener: one address that is not also a `listen` address.
    func metricsAddress(_ value: JSONValue, at path: String, listen: [ListenAddress]) -> ListenAddress? {
        guard let text = string(value, at: path) else { return nil }
        switch ListenAddress.validate(text, relativeTo: directory) {
        case .success(let address) where listen.contains(address) && !address.isEphemeral:
            return failure(path, "\(address) is already a \"listen\" address; the metrics listener needs its own")
        case .success(let address):
            return address
        case .failure(let refusal):
            return failure(path, "\"\(text)\" is not a listen address: \(refusal.reason)")
        }
    }

    func allowedHosts(_ value: JSONValue, at path: String) -> [String]? {
        guard let items = array(value, at: path) else { return nil }
        guard !items.isEmpty else { return failure(path, "must list at least one host") }
        var hosts: [String] = []
        for (itemPath, item) in items {
            guard let text = string(item, at: itemPath) else { continue }
            if let host = HostSyntax.normalizedHost(text) {
                if !hosts.contains(host) { hosts.append(host) }
            } else if HostSyntax.splitHostPort(text)?.port != nil {
                report(itemPath, "\"\(text)\" must be a host without a port (the Host header's port is ignored)")
            } else {
                report(itemPath, "\"\(text)\" is not a host name or IP address (IPv6 in brackets)")
            }
        }
        return hosts
    }

    func gate(_ object: ObjectReader) -> GateConfiguration {
        var gate = GateConfiguration()
        if let mode: GateConfiguration.Mode = object.choice("mode") { gate.mode = mode }
        if let wait = object.seconds("waitSeconds") { gate.waitSeconds = wait }
        return gate
    }

    static let limitsKeys = [
        "maxHeaderBytes", "maxBodyBytes", "retryBodyBytes", "maxConnections",
        "headerTimeoutSeconds", "idleTimeoutSeconds", "maxTunnels", "maxTunnelsPerClient",
    ]

    func limits(_ object: ObjectReader) -> LimitsConfiguration {
        var limits = LimitsConfiguration()
        if let v = object.integer("maxHeaderBytes", in: 1024...16_777_216) { limits.maxHeaderBytes = v }
        if let v = object.integer("maxBodyBytes", in: 0...Int.max) { limits.maxBodyBytes = v }
        if let v = object.integer("retryBodyBytes", in: 0...Int.max) { limits.retryBodyBytes = v }
        if let v = object.integer("maxConnections", in: 1...1_000_000) { limits.maxConnections = v }
        if let v = object.seconds("headerTimeoutSeconds", positive: true) { limits.headerTimeoutSeconds = v }
        if let v = object.seconds("idleTimeoutSeconds", positive: true) { limits.idleTimeoutSeconds = v }
        if let v = object.integer("maxTunnels", in: 0...1_000_000) { limits.maxTunnels = v }
        if let v = object.integer("maxTunnelsPerClient", in: 0...1_000_000) { limits.maxTunnelsPerClient = v }
        return limits
    }
}
