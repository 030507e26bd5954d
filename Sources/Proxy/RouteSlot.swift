import Config
import HTTP1
import Upstream

/// What a loop keeps per route of the runtime in force: the route's provider slot, its request
/// counters and its own copy of the upstream URL, found by name once per route and runtime rather
/// than once per request. A request holds its route and runtime through its slot: objects every
/// loop shares are not retained per request (docs/ARCHITECTURE.md §13, "Nothing shared is written").
final class RouteSlot {
    let route: CompiledRoute
    /// The runtime `route` belongs to.
    let runtime: ProxyRuntime
    /// The provider whose tokens the route carries (the default one when it names none).
    let provider: ProviderSlot
    let counters: RouteCounters
    /// The route's upstream, this loop's copy.
    let upstream: UpstreamURL?
    /// The client fields the route replaces (its credential headers, lowercased bytes), and the
    /// same plus `x-experiments` for a request that carries the proxy's experiment assignments:
    /// made once per loop rather than per request.
    let replacedNames: [[UInt8]]
    let replacedNamesWithExperiments: [[UInt8]]

    /// `route` must be a route of `runtime`: caches keyed by the runtime and the route's index
    /// (`InjectedLineCache`) would otherwise answer for another route.
    init(route: CompiledRoute, runtime: ProxyRuntime, provider: ProviderSlot, counters: RouteCounters) {
        precondition(runtime.router.routes.indices.contains(route.index) && runtime.router.routes[route.index] === route,
                     "a route slot's route belongs to its runtime")
        self.route = route
        self.runtime = runtime
        self.provider = provider
        self.counters = counters
        upstream = route.config.upstream?.privateCopy()
        replacedNames = route.config.credential == .none ? [] : route.injector.headerNames.map { Array($0.utf8) }
        replacedNamesWithExperiments = replacedNames + [Array("x-experiments".utf8)]
    }
}

extension RouteSlot {
    /// `HeaderPolicy.upstreamLines` for a request on this route: the client fields it replaces
    /// are left out, and `x-experiments` too when the request carries the proxy's assignments
    /// (a route that carries them replaces the client's, never merges with it). The names are
    /// read here, in place (chosen by the caller, they were retained for the call).
    func upstreamLines(_ head: borrowing HTTPRequestHead, peer: String, requestID: String, withExperiments: Bool,
                       supplies: inout SuppliedFields?) -> HeaderLines {
        if withExperiments {
            return HeaderPolicy.upstreamLines(head, peer: peer, requestID: requestID, removing: replacedNamesWithExperiments,
                                              supplies: &supplies)
        }
        return HeaderPolicy.upstreamLines(head, peer: peer, requestID: requestID, removing: replacedNames, supplies: &supplies)
    }
}

/// A loop's route slots for one runtime, by route index; a reload starts a new table.
struct RouteSlotTable {
    // Held, not just identified: a freed runtime's address could come back as a new one's.
    private var runtime: ProxyRuntime?
    private var slots: [RouteSlot?] = []

    /// The slot of `route` (a route of `runtime`), made by `make` the first time.
    mutating func slot(_ route: CompiledRoute, of runtime: ProxyRuntime, make: () -> RouteSlot) -> RouteSlot {
        if self.runtime !== runtime {
            self.runtime = runtime
            slots = Array(repeating: nil, count: runtime.router.routes.count)
        }
        guard slots.indices.contains(route.index), runtime.router.routes[route.index] === route else { return make() }
        if let slot = slots[route.index] { return slot }
        let slot = make()
        slots[route.index] = slot
        return slot
    }
}
