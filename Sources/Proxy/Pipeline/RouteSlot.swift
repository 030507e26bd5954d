import Config
import HTTP1
import Upstream

/// What a loop keeps per route of the runtime in force: the route's provider slot, its request
/// counters and its own copy of the upstream URL, found by name once per route and runtime rather
/// than once per request. A request holds its route and runtime through its slot: objects every
/// loop shares are not retained per request (nothing shared is written).
final class RouteSlot {
    let route: CompiledRoute
    /// The runtime `route` belongs to.
    let runtime: ProxyRuntime
    /// The provider whose tokens the route carries (the default one when it names none).
    let provider: ProviderSlot
    let counters: RouteCounters
    /// The route's upstream, this loop's copy.
    let upstream: UpstreamURL?
    /// The client fields left out of a request on this route, made once per loop rather than per
    /// request, by `RemovedFields` index: the route's credential headers (lowercased bytes); with
    /// `experiments`, `x-experiments` too; with `identity`, `accept-encoding`, `range`,
    /// `request-range` and `if-range`, for a response the proxy masks or records whole and in its
    /// identity form.
    private let removedNames: [[[UInt8]]]

    /// Which client fields a request leaves out besides the route's credential headers.
    struct RemovedFields {
        /// The request carries the proxy's experiment assignments (a route that carries them
        /// replaces the client's, never merges with it).
        var experiments: Bool
        /// The response is masked or recorded: the client chooses neither its encoding nor a range.
        var identity: Bool
        var index: Int { (experiments ? 1 : 0) + (identity ? 2 : 0) }
    }

    /// `route` must be a route of `runtime`: caches keyed by the runtime and the route's index
    /// (`InjectedLineCache`) would otherwise answer for another route.
    init(route: CompiledRoute, runtime: ProxyRuntime, provider: ProviderSlot, counters: RouteCounters) {
        precondition(
            runtime.router.routes.indices.contains(route.index) && runtime.router.routes[route.index] === route,
            "a route slot's route belongs to its runtime")
        self.route = route
        self.runtime = runtime
        self.provider = provider
        self.counters = counters
        upstream = route.config.upstream?.privateCopy()
        let replaced = route.config.credential == .none ? [] : route.injector.headerNames.map { Array($0.utf8) }
        let experiments = [Array("x-experiments".utf8)]
        // `request-range`: Apache httpd's byte-range filter still reads it when there is no `range`.
        let identity = ["accept-encoding", "range", "if-range", "request-range"].map { Array($0.utf8) }
        removedNames = [replaced, replaced + experiments, replaced + identity, replaced + experiments + identity]
    }
}

extension RouteSlot {
    /// `HeaderPolicy.upstreamLines` for a request on this route, without the client fields the
    /// route replaces and those `removing` names.
    func upstreamLines(
        _ head: borrowing HTTPRequestHead, peer: String, requestID: String, removing: RemovedFields,
        supplies: inout SuppliedFields?
    ) -> HeaderLines {
        // The names are read here, in place (chosen by the caller, they were retained for the call).
        HeaderPolicy.upstreamLines(
            head, peer: peer, requestID: requestID, removing: removedNames[removing.index],
            supplies: &supplies)
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
