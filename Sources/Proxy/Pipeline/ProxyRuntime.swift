import Config
import Credentials
import Experiments
import JSON

/// Everything a request reads that a config reload can change, built once per config and
/// never mutated: loops swap their reference to a new one, so requests take no lock.
public final class ProxyRuntime: Sendable {
    /// The configuration.
    public let configuration: ProxyConfiguration
    /// Routing over `configuration.routes`.
    public let router: Router
    /// Host, Origin and key checks.
    let access: AccessPolicy
    /// Run-time mock switches.
    public let mockModes: MockSwitchboard
    /// Mock folder state, shared by every loop and kept across reloads.
    public let mocks: MockFiles
    /// The `/_platform/health` body: the status, and the active profile when there is one.
    let healthBody: [UInt8]
    /// Each route's credential injector, by route index.
    public let injectors: [CredentialInjector]
    /// The configured experiments, compiled.
    public let experiments: ExperimentSet
    /// The provider a route without `provider` uses (looked up once: every request asks).
    let defaultProviderName: String

    /// Compiles `configuration`, resolving its `apiKey` source (a file is read here).
    public convenience init(configuration: ProxyConfiguration, mocks: MockFiles = MockFiles()) {
        // The key was resolved once at load; a source that stopped resolving refuses everything.
        let key = configuration.apiKey.map { (try? $0.resolve()) ?? "" }
        self.init(
            configuration: configuration, mocks: mocks, mockModes: MockSwitchboard(routes: configuration.routes),
            access: AccessPolicy(allowedHosts: configuration.allowedHosts, apiKey: key))
    }

    /// `mockModes` and `mocks` are the state every loop shares; `access` holds the key as resolved.
    private init(configuration: ProxyConfiguration, mocks: MockFiles, mockModes: MockSwitchboard, access: AccessPolicy)
    {
        self.configuration = configuration
        router = Router(routes: configuration.routes)
        self.access = access
        self.mockModes = mockModes
        healthBody = Array(
            (configuration.profile.map { "{\"status\":\"ok\",\"profile\":\(jsonQuoted($0))}" } ?? "{\"status\":\"ok\"}")
                .utf8)
        self.mocks = mocks
        injectors = router.routes.map(\.injector)
        experiments = ExperimentSet(configuration.experiments)
        defaultProviderName = configuration.defaultProvider?.name ?? NamedProvider.defaultName
    }

    /// This runtime compiled again for one event loop: its own routes, router and access lists,
    /// the same mock switches and mock folder state, and the `apiKey` as this runtime resolved it
    /// (never read again: every loop must accept the same key, even if its file changed since).
    /// Each loop retains and releases what it reads per request; objects of its own keep those
    /// writes off the other cores' cache lines (nothing shared is written; `bench/shared-writes.sh`
    /// measures it).
    public func forLoop() -> ProxyRuntime {
        ProxyRuntime(configuration: configuration, mocks: mocks, mockModes: mockModes, access: access.privateCopy())
    }

    /// How `route` uses its mock folder now: the run-time switch, else the global `mock`
    /// switch, else the route's configured mode. A route without an upstream always replays.
    /// Takes the compiled route, not its configuration: a configuration passed by value is a
    /// copy of every field, for every request.
    public func mockMode(_ route: CompiledRoute) -> MockConfiguration.Mode? {
        guard let mock = route.config.mock else { return nil }
        if route.config.upstream == nil { return .replay }
        switch mockModes.mode(of: route.config.name) {
        case .replay: return .replay
        case .record: return .record
        case .off: return .off
        case .configured: return configuration.mock ? .replay : mock.mode
        }
    }

    /// Why `provider`'s credentials are not usable, or nil when `/_platform/ready` may answer 200.
    public func unreadyReason(_ provider: ProviderConfiguration) -> String? {
        switch provider.grant {
        case .staticTokens:
            do {
                _ = try provider.accessToken?.resolveToken()
                _ = try provider.idToken?.resolveToken()
                return nil
            } catch {
                // Answered to any caller (probes skip the Host and key checks): no file path here;
                // the token watcher logs the details.
                return "the static tokens cannot be read or cannot be sent in a header"
            }
        default:
            return nil
        }
    }
}
