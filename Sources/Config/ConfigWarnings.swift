/// Settings that are valid but ignored or risky: `check-config` and `serve` print them, and the
/// exit code stays 0.
public enum ConfigWarnings {
    /// Client IDs that are obviously still the example's placeholder.
    static let placeholderMarkers = [
        "replace", "your-", "your_", "changeme", "change-me", "placeholder", "example", "todo", "xxx", "<",
    ]

    /// The warnings for a valid config, each at its JSON path.
    public static func of(_ config: ProxyConfiguration) -> [ConfigError] {
        var warnings: [ConfigError] = []
        if config.apiKey == nil {
            for (index, address) in config.listen.enumerated() where !address.isLoopback {
                warnings.append(
                    ConfigError(
                        path: "listen[\(index)]",
                        message:
                            "\(address) accepts connections from other machines and no apiKey is set, so anyone who reaches it "
                            + "sends requests with these credentials; set apiKey (clients send it as X-Proxy-Key) or listen on 127.0.0.1"
                    ))
            }
        }
        for named in config.providers {
            let provider = named.configuration
            let routes = config.routes.filter { $0.credential != .none && $0.provider == named.name }
            if config.providers.count > 1, routes.isEmpty, config.analytics?.provider != named.name {
                warnings.append(
                    ConfigError(
                        path: named.path,
                        message:
                            "no route or analytics uses this provider (set \"provider\": \"\(named.name)\" on a route); it can still be logged into"
                    ))
            }
            if provider.demo != nil, provider.grant == .staticTokens {
                warnings.append(
                    ConfigError(
                        path: "\(named.path).demo",
                        message:
                            "ignored with grant \"static\" (the static tokens are always in use, and POST /_platform/login/demo answers 404)"
                    ))
            }
            if provider.journey?.noSession == true, !routes.isEmpty {
                warnings.append(
                    ConfigError(
                        path: "\(named.path).journey.noSession",
                        message:
                            "AM issues no session, so a journey gets no tokens and the credentialed routes stay awaiting authorization"
                    ))
            }
            if let id = provider.clientID, placeholderMarkers.contains(where: { id.lowercased().contains(text: $0) }) {
                warnings.append(
                    ConfigError(
                        path: "\(named.path).clientID",
                        message:
                            "\"\(id)\" looks like a placeholder; use the client ID registered with the provider"))
            }
        }
        for (index, route) in config.routes.enumerated() where route.tokenExchange != nil && route.retryOn401 {
            warnings.append(
                ConfigError(
                    path: "routes[\(index)].retryOn401",
                    message:
                        "ignored with tokenExchange: the route's token is exchanged for it, and a refresh of the provider's would not change it"
                ))
        }
        return warnings
    }
}

extension ListenAddress {
    /// Whether the port is chosen by the kernel at bind time (port 0): two such entries never clash.
    public var isEphemeral: Bool {
        if case .tcp(_, 0) = self { return true }
        return false
    }

    /// Whether only this machine can connect: a Unix socket, `localhost`, 127.0.0.0/8 or ::1.
    public var isLoopback: Bool {
        switch self {
        case .unix: return true
        case .tcp(let host, _): return host == "localhost" || host == "::1" || host.hasPrefix("127.")
        }
    }
}
