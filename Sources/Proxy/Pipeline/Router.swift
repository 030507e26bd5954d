import Config
import Credentials
import Upstream

/// A route compiled once per config: its settings, its credential injector, the prefix it
/// matches and the provider whose tokens it carries.
public final class CompiledRoute: Sendable {
    /// The route as configured.
    public let config: RouteConfiguration
    /// Its position in `configuration.routes` (per-route caches are indexed by it).
    public let index: Int
    /// Formats and strips its credential headers.
    public let injector: CredentialInjector
    /// The path prefix without trailing slashes ("/" stays "/").
    public let prefix: String
    /// The route's own TLS settings for its upstream; nil: the defaults.
    public let tls: UpstreamTLS?
    /// The provider whose tokens it injects; nil on a route without credentials.
    public var provider: String? { config.provider }

    /// Compiles `config`, the route at `index`.
    public init(_ config: RouteConfiguration, index: Int) {
        self.config = config
        self.index = index
        injector = CredentialInjector(route: config)
        tls = config.tls.map { UpstreamTLS(configured: $0, serverNameHost: config.upstream?.host) }
        var prefix = config.path
        while prefix.count > 1 && prefix.hasSuffix("/") { prefix.removeLast() }
        self.prefix = prefix
    }
}

/// Longest-prefix routing on a segment boundary (docs/configuration.md, "Routing").
///
/// A prefix matches the path equal to it (without its trailing slash) or any path continuing
/// it with "/": `/accounts/` matches `/accounts`, `/accounts/` and `/accounts/me`, not `/accountsX`.
public struct Router: Sendable {
    /// Every route in config order (index = position).
    public let routes: [CompiledRoute]
    /// The same routes, longest prefix first.
    private let byLength: [CompiledRoute]

    /// Compiles the routes, longest prefix first.
    public init(routes: [RouteConfiguration]) {
        self.routes = routes.enumerated().map { index, route in CompiledRoute(route, index: index) }
        byLength = self.routes.sorted { $0.prefix.utf8.count > $1.prefix.utf8.count }
    }

    /// The matching route and the rest of the path after the prefix ("" or starting with "/").
    public func match(_ path: Substring) -> (route: CompiledRoute, rest: Substring)? {
        for route in byLength {
            if route.prefix == "/" { return (route, path) }
            guard path.utf8.starts(with: route.prefix.utf8) else { continue }
            let rest = Substring(path.utf8.dropFirst(route.prefix.utf8.count))
            if rest.isEmpty || rest.first == "/" { return (route, rest) }
        }
        return nil
    }
}
