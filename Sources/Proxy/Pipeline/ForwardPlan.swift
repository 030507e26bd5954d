import Config
import Credentials
import EventLoop
import Upstream

/// Where a routed request goes, decided once; kept while the request waits for credentials.
struct ForwardPlan {
    /// The route's provider slot, counters and upstream on this loop. It holds the route and the
    /// runtime, so the plan refers to them without retaining them: they are shared by every loop,
    /// and a reference count moved per request would move between the loops' CPU caches
    /// (`bench/shared-writes.sh` finds such writes).
    let slot: RouteSlot
    /// The matched route (its configuration is not copied per request); kept alive by `slot`.
    let route: Unretained<CompiledRoute>
    /// The runtime the route came from (a reload may replace it while the request waits); kept
    /// alive by `slot`.
    let source: Unretained<ProxyRuntime>
    /// The matched route.
    var compiled: CompiledRoute { route.object }
    /// The runtime the route came from.
    var runtime: ProxyRuntime { source.object }
    /// The route's index in its configuration.
    var routeIndex: Int { compiled.index }
    /// The path after the route's prefix.
    let rest: Substring
    /// The client's query (without "?"), if any.
    let query: Substring?
    let mockMode: MockConfiguration.Mode?

    /// `slot`'s route must have an upstream (`ProxyHandler.handle` answers the others; `url`
    /// traps without one).
    init(slot: RouteSlot, rest: Substring, query: Substring?, mockMode: MockConfiguration.Mode?) {
        self.slot = slot
        route = Unretained(slot.route)
        source = Unretained(slot.runtime)
        self.rest = rest
        self.query = query
        self.mockMode = mockMode
    }

    /// The upstream URL: the route's, with `rest` and `query` joined on. Made where the request
    /// is sent, and moved into its exchange: a URL kept in the plan was copied (each of its parts
    /// retained) on its way there.
    func url() -> UpstreamURL {
        // Unwrapped in place: a bound copy would retain each of its parts.
        UpstreamTarget.url(slot.upstream!, rest: rest, query: query)
    }
}

/// A route's injected lines, and whether they name Accept or Content-Type (a route may inject
/// under those names; curl's own would then be left out), found once with the lines.
struct InjectedLines {
    let lines: HeaderLines
    let supplies: SuppliedFields

    init(_ lines: HeaderLines) {
        self.lines = lines
        let found = lines.containsNames("accept", "content-type")
        supplies = SuppliedFields(accept: found.0, contentType: found.1)
    }
}

/// The injected header lines of each route for the token snapshot in force, formatted once per
/// token generation (and per runtime: a reload may change the routes) on each loop.
struct InjectedLineCache {
    private enum Slot { case unknown, missing, lines(InjectedLines) }
    // Held, not just identified: a freed snapshot's address could come back as a new one's.
    private var snapshot: CredentialSnapshot?
    private var runtime: ProxyRuntime?
    private var slots: [Slot] = []

    /// The lines of `plan`'s route for `snapshot`, or nil when its token is missing.
    mutating func lines(_ plan: ForwardPlan, snapshot: CredentialSnapshot) -> InjectedLines? {
        // plan.runtime is compared, not held in a local: a strong local would retain an object
        // every loop shares, per request.
        if self.snapshot !== snapshot || self.runtime !== plan.runtime {
            self.snapshot = snapshot
            self.runtime = plan.runtime
            slots = Array(repeating: .unknown, count: plan.runtime.configuration.routes.count)
        }
        guard slots.indices.contains(plan.routeIndex) else {
            return plan.compiled.injector.lines(snapshot, names: plan.compiled.config.headers).map(InjectedLines.init)
        }
        switch slots[plan.routeIndex] {
        case .lines(let lines): return lines
        case .missing: return nil
        case .unknown:
            let lines = plan.compiled.injector.lines(snapshot, names: plan.compiled.config.headers).map(
                InjectedLines.init)
            slots[plan.routeIndex] = lines.map { .lines($0) } ?? .missing
            return lines
        }
    }
}

/// The token bytes a loop masks in echoed responses, copied once per token snapshot, so that a
/// request retains an array only its own loop touches rather than one shared by every loop
/// (whose reference count would move between the loops' CPU caches).
struct EchoTokenCache {
    // Held, not just identified: a freed snapshot's address could come back as a new one's.
    private var snapshot: CredentialSnapshot?
    private var access: [UInt8]?
    private var id: [UInt8]?
    /// Maskers for each token, made once per snapshot (finding a token's anchor byte is a pass
    /// over it); each exchange copies the one it needs.
    private var accessMasker: EchoMasker?
    private var idMasker: EchoMasker?

    private mutating func follow(_ snapshot: CredentialSnapshot) {
        guard self.snapshot !== snapshot else { return }
        self.snapshot = snapshot
        // `Array(buffer)` makes new storage; `Array(array)` would share the snapshot's.
        access = snapshot.tokenBytes(for: .accessToken).map { $0.withUnsafeBufferPointer { Array($0) } }
        id = snapshot.tokenBytes(for: .jwt).map { $0.withUnsafeBufferPointer { Array($0) } }
        accessMasker = access.flatMap { EchoMasker(token: $0) }
        idMasker = id.flatMap { EchoMasker(token: $0) }
    }

    /// This loop's copy of the token a route of `kind` injects, nil when there is none.
    mutating func bytes(_ kind: CredentialKind, of snapshot: CredentialSnapshot) -> [UInt8]? {
        follow(snapshot)
        switch kind {
        case .accessToken: return access
        case .jwt: return id
        case .none: return nil
        }
    }

    /// A masker for the token a route of `kind` injects; nil when there is none or it is too
    /// short to mask (`EchoMasker.minimumTokenBytes`).
    mutating func masker(_ kind: CredentialKind, of snapshot: CredentialSnapshot) -> EchoMasker? {
        follow(snapshot)
        switch kind {
        case .accessToken: return accessMasker
        case .jwt: return idMasker
        case .none: return nil
        }
    }
}
