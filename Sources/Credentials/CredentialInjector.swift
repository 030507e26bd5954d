import Config
import Upstream

/// Decides which credential header lines a request carries, per hop (docs/security.md, "Redirects
/// at the boundary": libcurl protects only Authorization and Cookie across hosts, so the proxy
/// decides itself).
public struct CredentialInjector: Sendable {
    /// The route's credential header names, lowercased.
    public let headerNames: [String]
    /// Which token the route injects.
    public let kind: CredentialKind
    /// host:port entries that may receive credentials.
    public let credentialHosts: [String]
    /// The scheme of the route's upstream.
    public let upstreamScheme: String

    /// The injector of `route`.
    public init(route: RouteConfiguration) {
        headerNames = route.headers.map { $0.lowercased() }
        kind = route.credential
        credentialHosts = route.redirects.credentialHosts.map { $0.lowercased() }
        upstreamScheme = route.upstream?.scheme ?? "https"
    }

    /// Header names that never cross to a host without credentials: the injected ones
    /// (whoever set them), Authorization, Cookie and Proxy-Authorization.
    public var strippedOnForeignHosts: [String] {
        Array(Set(headerNames + ["authorization", "cookie", "proxy-authorization"]))
    }

    /// Whether a hop from `current` to `target` may carry credentials: the target is a listed
    /// host:port, and its scheme is https or the upstream's own, never downgrading https → http.
    public func mayCarryCredentials(from current: UpstreamURL, to target: UpstreamURL) -> Bool {
        guard credentialHosts.contains(target.hostPort.lowercased()) else { return false }
        if target.scheme == "https" { return true }
        return target.scheme == upstreamScheme && current.scheme != "https"
    }

    /// The injected lines (`Name: <type> <token>`) for a hop that may carry credentials; nil
    /// when the token is missing. Callers keep the result per token generation.
    public func lines(_ snapshot: CredentialSnapshot, names: [String]) -> HeaderLines? {
        guard kind != .none else { return HeaderLines() }
        guard let value = snapshot.value(for: kind) else { return nil }
        var lines = HeaderLines()
        for name in names { lines.append(name: name.utf8, value: value.utf8) }
        return lines
    }
}
