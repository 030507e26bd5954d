import Config
import Credentials
import Upstream

/// Where a routed request goes, decided once; kept while the request waits for credentials.
struct ForwardPlan {
    let route: RouteConfiguration
    /// The route's index in the runtime's configuration.
    let routeIndex: Int
    let injector: CredentialInjector
    let rest: Substring
    let url: UpstreamURL
    let mockMode: MockConfiguration.Mode?
}

/// The injected header lines of each route for the token snapshot in force, formatted once per
/// token generation (and per runtime: a reload may change the routes) on each loop.
struct InjectedLineCache {
    private enum Slot { case unknown, missing, lines(HeaderLines) }
    private var snapshot: ObjectIdentifier?
    private var runtime: ObjectIdentifier?
    private var slots: [Slot] = []

    /// The lines of `plan`'s route for `snapshot`, or nil when its token is missing.
    mutating func lines(_ plan: ForwardPlan, snapshot: CredentialSnapshot, runtime: ProxyRuntime) -> HeaderLines? {
        if self.snapshot != ObjectIdentifier(snapshot) || self.runtime != ObjectIdentifier(runtime) {
            self.snapshot = ObjectIdentifier(snapshot)
            self.runtime = ObjectIdentifier(runtime)
            slots = Array(repeating: .unknown, count: runtime.configuration.routes.count)
        }
        guard slots.indices.contains(plan.routeIndex) else {
            return plan.injector.lines(snapshot, names: plan.route.headers)
        }
        switch slots[plan.routeIndex] {
        case .lines(let lines): return lines
        case .missing: return nil
        case .unknown:
            let lines = plan.injector.lines(snapshot, names: plan.route.headers)
            slots[plan.routeIndex] = lines.map { .lines($0) } ?? .missing
            return lines
        }
    }
}
