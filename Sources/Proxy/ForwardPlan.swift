import Config
import Credentials

/// Where a routed request goes, decided once; kept while the request waits for credentials.
struct ForwardPlan {
    let route: RouteConfiguration
    let injector: CredentialInjector
    let rest: Substring
    let url: UpstreamURL
    let mockMode: MockConfiguration.Mode?
}
