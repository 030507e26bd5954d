import Config
import Credentials

/// Everything a request reads that a config reload can change, built once per config and
/// never mutated: loops swap their reference to a new one, so requests take no lock.
public final class ProxyRuntime: Sendable {
    /// The configuration.
    public let configuration: ProxyConfiguration
    /// Routing over `configuration.routes`.
    public let router: Router
    /// `allowedHosts`, lowercased.
    public let allowedHosts: [String]
    /// Mock folder state, shared by every loop and kept across reloads.
    public let mocks: MockFiles
    /// Each route's credential injector, by route index.
    public let injectors: [CredentialInjector]

    /// Compiles `configuration`.
    public init(configuration: ProxyConfiguration, mocks: MockFiles = MockFiles()) {
        self.configuration = configuration
        router = Router(routes: configuration.routes)
        allowedHosts = configuration.allowedHosts.map { $0.lowercased() }
        self.mocks = mocks
        injectors = configuration.routes.map(CredentialInjector.init(route:))
    }

    /// Whether `route` answers from its mock folder now.
    public func replaysMocks(_ route: RouteConfiguration) -> Bool {
        guard let mock = route.mock else { return false }
        return configuration.mock || mock.mode == .replay || route.upstream == nil
    }

    /// Why credentials are not usable, or nil when `/_platform/ready` may answer 200.
    public func unreadyReason() -> String? {
        guard let provider = configuration.provider else { return nil }
        switch provider.grant {
        case .staticTokens:
            do {
                _ = try provider.accessToken?.resolve()
                _ = try provider.idToken?.resolve()
                return nil
            } catch {
                return "the static tokens cannot be read: \(error.message)"
            }
        default:
            return "the \(provider.grant.rawValue) grant has no login state yet"
        }
    }
}
