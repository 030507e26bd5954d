/// The whole validated config file; relative paths in it are already absolute.
package struct ProxyConfiguration: Sendable, Equatable {
    /// The config `serve` uses when no `--config` is given, relative to the working directory.
    package static let defaultPath = "Config/platform-proxy.json"

    /// Listeners. Default ["127.0.0.1:8080"].
    package var listen: [ListenAddress]
    /// Event loops; 0 means one per core. Default 0.
    package var workers: Int
    /// Host header values (port ignored, lowercased) that are served; others get 403. Default ["localhost", "127.0.0.1", "[::1]"].
    package var allowedHosts: [String]
    /// Value every request must carry in X-Proxy-Key; nil turns the check off. Default nil.
    package var apiKey: SecretSource?
    /// Absolute directory for tokens.json and the analytics store. Default "state" beside the config file.
    package var stateDirectory: String
    /// Global switch: every route with a mock directory replays. Default false.
    package var mock: Bool
    /// The token issuers by name, in file order: `providers`, or the single `provider` as one
    /// named "default". Default [].
    package var providers: [NamedProvider] = []
    /// The default provider: the one named "default", else the first; setting it replaces
    /// `providers` with that one provider named "default". Default nil.
    package var provider: ProviderConfiguration? {
        get { defaultProvider?.configuration }
        set { providers = newValue.map { [NamedProvider(name: NamedProvider.defaultName, configuration: $0)] } ?? [] }
    }
    /// The provider `/_platform/auth`'s top-level fields describe: "default" if so named, else the first.
    package var defaultProvider: NamedProvider? {
        providers.first { $0.name == NamedProvider.defaultName } ?? providers.first
    }
    /// The provider named `name`.
    package func provider(named name: String) -> NamedProvider? { providers.first { $0.name == name } }
    /// Behaviour while logged out. Default reject.
    package var gate: GateConfiguration
    /// Size and time limits.
    package var limits: LimitsConfiguration
    /// Proxied path prefixes, in config order. Default [].
    package var routes: [RouteConfiguration]
    /// The analytics sidecar; nil disables `/_platform/analytics/*`. Default nil.
    package var analytics: AnalyticsConfiguration?
    /// A second listener serving only metrics, health and readiness, without Host or key checks (for a
    /// Prometheus scrape of a sidecar that listens on loopback). Default nil.
    package var metricsListen: ListenAddress?
    /// Seconds a SIGTERM/SIGINT waits for in-flight requests before closing them. Default 9 (under Docker's 10 s).
    package var shutdownGraceSeconds: Double = 9
    /// Whether `serve` reloads when the config file changes (inotify; follows a ConfigMap's symlink swap), as on SIGHUP. Default true.
    package var watchConfig: Bool = true
    /// `log.access`: one info line per request (buffered per loop, written every second or 64 KiB);
    /// false leaves warnings and errors only. Default true.
    package var accessLog: Bool = true
    /// A/B experiments, in config order. Default [].
    package var experiments: [ExperimentConfiguration] = []
    /// The profile this configuration was built with (`--profile`), nil for the base. Default nil.
    package var profile: String?
    /// The names under `profiles`, in file order. Default [].
    package var profileNames: [String] = []
    /// On credentialed routes, mask the injected token where a response echoes it (headers and body). Default true.
    package var maskEchoedCredentials: Bool
    /// Absolute directory of the config file, against which relative paths were resolved.
    package var configDirectory: String

    /// The default listener.
    package static let defaultListen: [ListenAddress] = [.tcp(host: "127.0.0.1", port: 8080)]
    /// The default allowed hosts.
    package static let defaultAllowedHosts = ["localhost", "127.0.0.1", "[::1]"]

    /// A configuration with the documented defaults unless given; `stateDirectory` defaults to "state" in `configDirectory`.
    package init(
        configDirectory: String, listen: [ListenAddress] = ProxyConfiguration.defaultListen, workers: Int = 0,
        allowedHosts: [String] = ProxyConfiguration.defaultAllowedHosts, apiKey: SecretSource? = nil,
        stateDirectory: String? = nil, mock: Bool = false, provider: ProviderConfiguration? = nil,
        gate: GateConfiguration = GateConfiguration(), limits: LimitsConfiguration = LimitsConfiguration(),
        routes: [RouteConfiguration] = [], analytics: AnalyticsConfiguration? = nil,
        maskEchoedCredentials: Bool = true
    ) {
        self.configDirectory = configDirectory
        self.listen = listen
        self.workers = workers
        self.allowedHosts = allowedHosts
        self.apiKey = apiKey
        self.stateDirectory = stateDirectory ?? FileSystem.resolve("state", against: configDirectory)
        self.mock = mock
        self.providers = provider.map { [NamedProvider(name: NamedProvider.defaultName, configuration: $0)] } ?? []
        self.gate = gate
        self.limits = limits
        self.routes = routes
        self.analytics = analytics
        self.maskEchoedCredentials = maskEchoedCredentials
    }
}

/// One entry of `providers` (or the single `provider`, named "default").
package struct NamedProvider: Sendable, Equatable {
    /// The name the single `provider` key gets.
    package static let defaultName = "default"
    /// The key under `providers`: letters, digits, '_' and '-', at most 32. Required.
    package var name: String
    /// The provider block.
    package var configuration: ProviderConfiguration
    /// Where it sits in the config file: `provider` or `providers.<name>`.
    package var path: String

    /// A named provider; `path` defaults to where the single `provider` key sits.
    package init(name: String, configuration: ProviderConfiguration, path: String = "provider") {
        self.name = name
        self.configuration = configuration
        self.path = path
    }

    /// The token store file in the state directory: `tokens.json` for the provider named
    /// "default" (so a config that gains names keeps its login), else `tokens-<name>.json`.
    package var tokenFileName: String { name == Self.defaultName ? "tokens.json" : "tokens-\(name).json" }
    /// The journey session file, named like the token file.
    package var journeySessionFileName: String {
        name == Self.defaultName ? "journey-session.json" : "journey-session-\(name).json"
    }
}
