import JSON

extension ConfigDecoder {
    static let routeKeys = [
        "name", "path", "upstream", "credential", "provider", "headers", "redirects", "retryOn401", "timeoutSeconds",
        "mock",
        "experimentHeader",
        "encodedSlashes", "tokenExchange", "tls", "upgrades", "tunnelIdleTimeoutSeconds", "streamIdleTimeoutSeconds",
    ]

    /// Headers that frame or route the message: injecting a token into them would break the exchange.
    static let reservedHeaders: Set<String> = [
        "host", "content-length", "transfer-encoding", "connection", "keep-alive",
        "proxy-connection", "te", "trailer", "upgrade", "expect",
    ]

    /// The labels the proxy counts and logs its own requests under (probes, `/_platform`
    /// endpoints, requests no route matched): a route of that name would be mixed up with them.
    static let reservedRouteNames: Set<String> = ["_probe", "_platform", "_unrouted"]

    /// The valid routes with their JSON paths; names and paths must be unique.
    func routes(_ value: JSONValue, at path: String) -> [(route: RouteConfiguration, path: String)]? {
        guard let items = array(value, at: path) else { return nil }
        var routes: [(route: RouteConfiguration, path: String)] = []
        for (itemPath, item) in items {
            guard let route = route(item, at: itemPath) else { continue }
            if let other = routes.first(where: { $0.route.name == route.name }) {
                report(itemPath + ".name", "the name \"\(route.name)\" is already used by \(other.path)")
            }
            if let other = routes.first(where: { $0.route.path == route.path }) {
                report(itemPath + ".path", "the path \"\(route.path)\" is already used by \(other.path)")
            }
            routes.append((route, itemPath))
        }
        return routes
    }

    /// One route; nil when its name or path is missing or invalid (reported).
    func route(_ value: JSONValue, at path: String) -> RouteConfiguration? {
        guard let object = ObjectReader(value, at: path, keys: ConfigDecoder.routeKeys, decoder: self) else {
            return nil
        }
        let name = object.read("name", required: true, routeName)
        let routePath = object.read("path", required: true, routePath)
        let upstream = object.read("upstream", upstreamURL)
        let mock = object.object("mock", keys: ["directory", "mode", "overwrite"]).flatMap(mock)
        if !object.has("upstream"), !object.has("mock") {
            report(path, "needs an \"upstream\", a \"mock\" directory, or both")
        }
        if let mock, mock.mode == .record, upstream == nil, !object.has("upstream") {
            report(path + ".mock.mode", "\"record\" needs an upstream to record from")
        }
        var redirects = RedirectConfiguration(credentialHosts: upstream.map { [$0.hostPort] } ?? [])
        if let reader = object.object("redirects", keys: ["follow", "max", "credentialHosts", "crossHostMethods"]) {
            if object.has("upstream") {
                redirects = self.redirects(reader, upstream: upstream, default: redirects)
            } else {
                report(reader.path, "only applies to a route with an upstream")
            }
        }
        let headers = object.read("headers", credentialHeaders) ?? RouteConfiguration.defaultHeaders
        let credential: CredentialKind = object.choice("credential") ?? .none
        let provider = object.read("provider", providerName)
        let retryOn401 = object.bool("retryOn401") ?? false
        let timeout = object.seconds("timeoutSeconds", positive: true) ?? 30
        let experimentHeader = object.bool("experimentHeader") ?? false
        let encodedSlashes: EncodedSlashes = object.choice("encodedSlashes") ?? .reject
        let upgrades = object.read("upgrades", upgradeTokens) ?? ["websocket"]
        let tunnelIdle = object.seconds("tunnelIdleTimeoutSeconds", positive: true) ?? 3600
        let streamIdle = object.seconds("streamIdleTimeoutSeconds", positive: true)
        let tokenExchange = object.object("tokenExchange", keys: Self.tokenExchangeKeys).flatMap(tokenExchange)
        let tls = object.object("tls", keys: Self.tlsKeys).flatMap(tls)
        if object.has("tokenExchange"), credential != .accessToken {
            report(
                path + ".tokenExchange",
                "needs \"credential\": \"access_token\" (the token exchanged is the provider's access token)")
        }
        // Everything is read before this point so a bad name or path hides no other error.
        guard let name, let routePath else { return nil }
        var route = RouteConfiguration(
            name: name, path: routePath, upstream: upstream, credential: credential, headers: headers,
            redirects: redirects, retryOn401: retryOn401, timeoutSeconds: timeout, mock: mock,
            experimentHeader: experimentHeader, encodedSlashes: encodedSlashes)
        route.provider = provider
        route.upgrades = upgrades
        route.tunnelIdleTimeoutSeconds = tunnelIdle
        route.streamIdleTimeoutSeconds = streamIdle
        route.tokenExchange = tokenExchange
        route.tls = tls
        return route
    }

    /// The `Upgrade` protocol names a route tunnels (lowercased tokens; `[]` tunnels none).
    private func upgradeTokens(_ value: JSONValue, at path: String) -> [String]? {
        guard let names = strings(value, at: path, nonEmpty: false) else { return nil }
        var tokens: [String] = []
        for name in names {
            let isToken =
                !name.isEmpty
                && name.utf8.allSatisfy { b in
                    (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A)
                        || b == UInt8(ascii: "-") || b == UInt8(ascii: "_") || b == UInt8(ascii: ".")
                        || b == UInt8(ascii: "/")
                }
            // A request's protocol is matched without its version (`websocket/13` is `websocket`):
            // a version here would never match, so it is dropped the same way.
            let protocolName = name.split(separator: "/", omittingEmptySubsequences: false)[0]
            guard isToken, !protocolName.isEmpty else {
                report(path, "\"\(name)\" is not an Upgrade protocol name (letters, digits, - _ . /)")
                return nil
            }
            tokens.append(protocolName.lowercased())
        }
        return tokens
    }

    private func routeName(_ value: JSONValue, at path: String) -> String? {
        guard let name = string(value, at: path) else { return nil }
        let allowed = name.utf8.allSatisfy { b in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A)
                || b == UInt8(ascii: "-") || b == UInt8(ascii: "_") || b == UInt8(ascii: ".")
        }
        guard allowed else { return failure(path, "may contain only letters, digits, '.', '_' and '-'") }
        guard !Self.reservedRouteNames.contains(name) else {
            return failure(path, "\"\(name)\" is reserved: the proxy's own requests are counted and logged under it")
        }
        return name
    }

    private func routePath(_ value: JSONValue, at path: String) -> String? {
        guard let text = string(value, at: path) else { return nil }
        guard text.hasPrefix("/") else { return failure(path, "must begin with \"/\"") }
        guard
            !text.utf8.contains(where: {
                $0 <= 0x20 || $0 == 0x7F || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#")
            })
        else { return failure(path, "must not contain spaces, control characters, '?' or '#'") }
        let segments = text.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        guard !segments.contains(where: { $0 == "." || $0 == ".." }) else {
            return failure(path, "must not contain \".\" or \"..\" segments")
        }
        guard text != "/_platform", !text.hasPrefix("/_platform/") else {
            return failure(path, "\"/_platform/\" is reserved for the proxy's own endpoints")
        }
        return text
    }

    private func upstreamURL(_ value: JSONValue, at path: String) -> UpstreamURL? {
        guard let url = url(value, at: path) else { return nil }
        guard url.query == nil else {
            return failure(path, "must not have a query string (the client's query is passed on)")
        }
        return url
    }

    private func credentialHeaders(_ value: JSONValue, at path: String) -> [String]? {
        guard let items = array(value, at: path) else { return nil }
        guard !items.isEmpty else { return failure(path, "must list at least one header name") }
        var headers: [String] = []
        for (itemPath, item) in items {
            guard let name = string(item, at: itemPath) else { continue }
            if !HostSyntax.isToken(name) {
                report(itemPath, "\"\(name)\" is not a valid header name")
            } else if ConfigDecoder.reservedHeaders.contains(name.lowercased()) {
                report(itemPath, "\"\(name)\" cannot carry a credential: the proxy manages that header")
            } else if headers.contains(where: { $0.lowercased() == name.lowercased() }) {
                report(itemPath, "\"\(name)\" is listed twice")
            } else {
                headers.append(name)
            }
        }
        return headers
    }

    private func redirects(
        _ object: ObjectReader, upstream: UpstreamURL?, default fallback: RedirectConfiguration
    ) -> RedirectConfiguration {
        var redirects = fallback
        if let follow = object.bool("follow") { redirects.follow = follow }
        if let max = object.integer("max", in: 0...20) { redirects.max = max }
        if let methods: RedirectConfiguration.CrossHostMethods = object.choice("crossHostMethods") {
            redirects.crossHostMethods = methods
        }
        let defaultPort = UpstreamURL.defaultPort(for: upstream?.scheme ?? "https")
        if let hosts = object.read("credentialHosts", { credentialHosts($0, at: $1, defaultPort: defaultPort) }) {
            redirects.credentialHosts = hosts
        }
        return redirects
    }

    /// "host" or "host:port" entries, stored as "host:port" with the upstream scheme's default port filled in.
    private func credentialHosts(_ value: JSONValue, at path: String, defaultPort: UInt16) -> [String]? {
        guard let items = array(value, at: path) else { return nil }
        var hosts: [String] = []
        for (itemPath, item) in items {
            guard let text = string(item, at: itemPath) else { continue }
            guard let (host, portText) = HostSyntax.splitHostPort(text) else {
                report(itemPath, "\"\(text)\" is not a host or host:port")
                continue
            }
            var port = defaultPort
            if let portText {
                guard let explicit = HostSyntax.port(portText) else {
                    report(itemPath, "the port in \"\(text)\" is not a number from 1 to 65535")
                    continue
                }
                port = explicit
            }
            let entry = "\(host):\(port)"
            if !hosts.contains(entry) { hosts.append(entry) }
        }
        return hosts
    }

    private func mock(_ object: ObjectReader) -> MockConfiguration? {
        guard let directory = object.read("directory", required: true, filePath) else { return nil }
        return MockConfiguration(
            directory: directory, mode: object.choice("mode") ?? .replay, overwrite: object.bool("overwrite") ?? false)
    }
}
