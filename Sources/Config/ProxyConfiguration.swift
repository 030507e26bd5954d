/// The whole validated config file; relative paths in it are already absolute.
public struct ProxyConfiguration: Sendable, Equatable {
    /// The config `serve` uses when no `--config` is given, relative to the working directory.
    public static let defaultPath = "Config/platform-proxy.json"

    /// Listeners. Default ["127.0.0.1:8080"].
    public var listen: [ListenAddress]
    /// Event loops; 0 means one per core. Default 0.
    public var workers: Int
    /// Host header values (port ignored, lowercased) that are served; others get 403. Default ["localhost", "127.0.0.1", "[::1]"].
    public var allowedHosts: [String]
    /// Value every request must carry in X-Proxy-Key; nil turns the check off. Default nil.
    public var apiKey: SecretSource?
    /// Absolute directory for tokens.json and the analytics store. Default "state" beside the config file.
    public var stateDirectory: String
    /// Global switch: every route with a mock directory replays. Default false.
    public var mock: Bool
    /// The token issuers by name, in file order: `providers`, or the single `provider` as one
    /// named "default". Default [].
    public var providers: [NamedProvider] = []
    /// The default provider: the one named "default", else the first; setting it replaces
    /// `providers` with that one provider named "default". Default nil.
    public var provider: ProviderConfiguration? {
        get { defaultProvider?.configuration }
        set { providers = newValue.map { [NamedProvider(name: NamedProvider.defaultName, configuration: $0)] } ?? [] }
    }
    /// The provider `/_platform/auth`'s top-level fields describe: "default" if so named, else the first.
    public var defaultProvider: NamedProvider? {
        providers.first { $0.name == NamedProvider.defaultName } ?? providers.first
    }
    /// The provider named `name`.
    public func provider(named name: String) -> NamedProvider? { providers.first { $0.name == name } }
    /// Behaviour while logged out. Default reject.
    public var gate: GateConfiguration
    /// Size and time limits.
    public var limits: LimitsConfiguration
    /// Proxied path prefixes, in config order. Default [].
    public var routes: [RouteConfiguration]
    /// The analytics sidecar; nil disables `/_platform/analytics/*`. Default nil.
    public var analytics: AnalyticsConfiguration?
    /// A second listener serving only metrics, health and readiness, without Host or key checks (for a
    /// Prometheus scrape of a sidecar that listens on loopback). Default nil.
    public var metricsListen: ListenAddress?
    /// Seconds a SIGTERM/SIGINT waits for in-flight requests before closing them. Default 9 (under Docker's 10 s).
    public var shutdownGraceSeconds: Double = 9
    /// Whether `serve` reloads when the config file changes (inotify; follows a ConfigMap's symlink swap), as on SIGHUP. Default true.
    public var watchConfig: Bool = true
    /// `log.access`: one info line per request (buffered per loop, written every second or 64 KiB);
    /// false leaves warnings and errors only. Default true.
    public var accessLog: Bool = true
    /// A/B experiments, in config order. Default [].
    public var experiments: [ExperimentConfiguration] = []
    /// The profile this configuration was built with (`--profile`), nil for the base. Default nil.
    public var profile: String?
    /// The names under `profiles`, in file order. Default [].
    public var profileNames: [String] = []
    /// On credentialed routes, mask the injected token where a response echoes it (headers and body). Default true.
    public var maskEchoedCredentials: Bool
    /// Absolute directory of the config file, against which relative paths were resolved.
    public var configDirectory: String

    /// The default listener.
    public static let defaultListen: [ListenAddress] = [.tcp(host: "127.0.0.1", port: 8080)]
    /// The default allowed hosts.
    public static let defaultAllowedHosts = ["localhost", "127.0.0.1", "[::1]"]

    /// A configuration with the documented defaults unless given; `stateDirectory` defaults to "state" in `configDirectory`.
    public init(
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
public struct NamedProvider: Sendable, Equatable {
    /// The name the single `provider` key gets.
    public static let defaultName = "default"
    /// The key under `providers`: letters, digits, '_' and '-', at most 32. Required.
    public var name: String
    /// The provider block.
    public var configuration: ProviderConfiguration
    /// Where it sits in the config file: `provider` or `providers.<name>`.
    public var path: String

    /// A named provider; `path` defaults to where the single `provider` key sits.
    public init(name: String, configuration: ProviderConfiguration, path: String = "provider") {
        self.name = name
        self.configuration = configuration
        self.path = path
    }

    /// The token store file in the state directory: `tokens.json` for the provider named
    /// "default" (so a config that gains names keeps its login), else `tokens-<name>.json`.
    public var tokenFileName: String { name == Self.defaultName ? "tokens.json" : "tokens-\(name).json" }
    /// The journey session file, named like the token file.
    public var journeySessionFileName: String {
        name == Self.defaultName ? "journey-session.json" : "journey-session-\(name).json"
    }
}
