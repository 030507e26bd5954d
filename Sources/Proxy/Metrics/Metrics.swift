import Analytics
import Credentials
import EventLoop
import Experiments

/// One loop's counters. Mutated only on its loop, so the request path takes no lock; a scrape
/// asks every loop for a copy by message (`MetricsHub.gather`).
final class LoopMetrics: @unchecked Sendable {
    private var snapshot = MetricsSnapshot()
    /// The counters every request moves, per route name; a routed request reaches its route's
    /// through the loop's `RouteSlot`, with no lookup by name.
    private var routes: [String: RouteCounters] = [:]

    /// The request counters of `route`, made on first use and kept for the process's life (a
    /// reload that drops a route leaves its counts in the metrics, as before).
    func counters(route: String) -> RouteCounters {
        if let counters = routes[route] { return counters }
        let counters = RouteCounters()
        routes[route] = counters
        return counters
    }

    func request(route: String, status: Int, seconds: Double) {
        counters(route: route).request(status: status, seconds: seconds)
    }

    func stripped(route: String) { snapshot.stripped[route, default: 0] += 1 }
    func upstreamError(route: String, kind: String) {
        snapshot.upstreamErrors[RouteKind(route: route, kind: kind), default: 0] += 1
    }
    func mockRecorded(route: String) { snapshot.mockRecorded[route, default: 0] += 1 }
    func gateRejected(route: String, provider: String) {
        snapshot.gateRejections[RouteKind(route: route, kind: provider), default: 0] += 1
    }
    func retriedAfter401(route: String) { snapshot.retries401[route, default: 0] += 1 }
    func echoMasked(route: String, count: Int) { snapshot.echoMasked[route, default: 0] += count }
    func tunnelOpened(route: String) {
        snapshot.tunnelsOpened[route, default: 0] += 1
        snapshot.tunnelsOpen[route, default: 0] += 1
    }
    func tunnelClosed(route: String, reason: String, wasOpen: Bool) {
        snapshot.tunnelsClosed[RouteKind(route: route, kind: reason), default: 0] += 1
        if wasOpen { snapshot.tunnelsOpen[route, default: 0] -= 1 }
    }

    /// Everything counted, as one value (the per-route counters folded in).
    func copy() -> MetricsSnapshot {
        var copy = snapshot
        for (route, counters) in routes {
            for (status, count) in counters.statuses {
                copy.requests[RouteStatus(route: route, status: status), default: 0] += count
            }
            if counters.latency.count > 0 { copy.latency[route] = counters.latency }
            if counters.injected > 0 { copy.injected[route] = counters.injected }
        }
        return copy
    }
}

/// One route's counters on one loop: what every request to it moves, reached by reference.
final class RouteCounters {
    /// Requests by status, in first-seen order: a route answers with few distinct statuses, so a
    /// short scan beats hashing.
    fileprivate private(set) var statuses: [(status: Int, count: Int)] = []
    fileprivate private(set) var latency = LatencyHistogram()
    /// Requests sent with injected credentials.
    var injected = 0

    func request(status: Int, seconds: Double) {
        if let i = statuses.firstIndex(where: { $0.status == status }) {
            statuses[i].count += 1
        } else {
            statuses.append((status, 1))
        }
        latency.observe(seconds)
    }
}

struct RouteStatus: Hashable, Sendable {
    var route: String
    var status: Int
}

struct RouteKind: Hashable, Sendable {
    var route: String
    var kind: String
}

/// Request latency histogram with fixed buckets (seconds).
struct LatencyHistogram: Sendable {
    static let bounds: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
    var counts = [Int](repeating: 0, count: LatencyHistogram.bounds.count)
    var sum = 0.0
    var count = 0

    mutating func observe(_ seconds: Double) {
        if let index = Self.bounds.firstIndex(where: { seconds <= $0 }) { counts[index] += 1 }
        sum += seconds
        count += 1
    }

    mutating func merge(_ other: LatencyHistogram) {
        for i in counts.indices { counts[i] += other.counts[i] }
        sum += other.sum
        count += other.count
    }
}

/// All counters, as one value that loops' copies merge into.
struct MetricsSnapshot: Sendable {
    var requests: [RouteStatus: Int] = [:]
    /// Latency by route.
    var latency: [String: LatencyHistogram] = [:]
    var injected: [String: Int] = [:]
    var stripped: [String: Int] = [:]
    var upstreamErrors: [RouteKind: Int] = [:]
    var mockRecorded: [String: Int] = [:]
    /// By route and provider (`kind` holds the provider name).
    var gateRejections: [RouteKind: Int] = [:]
    var retries401: [String: Int] = [:]
    var echoMasked: [String: Int] = [:]
    /// Tunnels whose upstream answered 101, by route.
    var tunnelsOpened: [String: Int] = [:]
    /// Tunnels closed (opened or not), by route and reason (`kind`).
    var tunnelsClosed: [RouteKind: Int] = [:]
    /// Tunnels open now, by route (a gauge: opened minus closed after opening).
    var tunnelsOpen: [String: Int] = [:]

    mutating func merge(_ other: MetricsSnapshot) {
        requests.merge(other.requests, uniquingKeysWith: +)
        latency.merge(other.latency) { mine, theirs in
            var sum = mine
            sum.merge(theirs)
            return sum
        }
        injected.merge(other.injected, uniquingKeysWith: +)
        stripped.merge(other.stripped, uniquingKeysWith: +)
        upstreamErrors.merge(other.upstreamErrors, uniquingKeysWith: +)
        mockRecorded.merge(other.mockRecorded, uniquingKeysWith: +)
        gateRejections.merge(other.gateRejections, uniquingKeysWith: +)
        retries401.merge(other.retries401, uniquingKeysWith: +)
        echoMasked.merge(other.echoMasked, uniquingKeysWith: +)
        tunnelsOpened.merge(other.tunnelsOpened, uniquingKeysWith: +)
        tunnelsClosed.merge(other.tunnelsClosed, uniquingKeysWith: +)
        tunnelsOpen.merge(other.tunnelsOpen, uniquingKeysWith: +)
    }
}

/// Config reloads so far, and how the last one ended.
public struct ReloadStatus: Sendable {
    /// Reloads that replaced the config.
    public var ok = 0
    /// Reloads refused (the old config stayed).
    public var failed = 0
    /// Whether the last load (the start, or the last reload) succeeded.
    public var lastSucceeded = true
    /// Unix time of the last successful load.
    public var lastSuccessTime = 0.0
    /// What the last refused reload reported (the problems with their JSON paths, as logged);
    /// nil once a reload succeeds.
    public var lastErrors: String?

    /// The status at start: the config was loaded at `startTime`.
    public init(startTime: Double = 0) { lastSuccessTime = startTime }
}

/// Knows every loop's counters; filled before the loops start, read-only afterwards.
public final class MetricsHub: @unchecked Sendable {
    private var members: [(loop: EventLoop, metrics: LoopMetrics)] = []
    private var openConnections: @Sendable () -> Int = { 0 }
    private var reloads: @Sendable () -> ReloadStatus = { ReloadStatus() }
    private var analytics: AnalyticsCounters?
    private var refreshes: [(provider: String, counters: RefreshCounters)] = []
    private var experiments: ExperimentCounters?
    /// Every loop's ring of recent exchanges (added before the loops serve), for the console.
    var requestRings: [(loop: EventLoop, ring: RequestRing)] = []

    /// The experiment counters to report (set before the loops serve).
    func setExperiments(_ counters: ExperimentCounters) { experiments = counters }

    /// The token refresh counters to report (OAuth grants), by provider.
    func setRefreshes(_ counters: [(provider: String, counters: RefreshCounters)]) { refreshes = counters }

    /// The analytics counters to report (set before the loops serve).
    func setAnalytics(_ counters: AnalyticsCounters) { analytics = counters }

    /// The profile the process runs with (fixed at start; a reload cannot switch it).
    public var profile: String?

    /// Creates an empty hub.
    public init() {}

    func add(loop: EventLoop, metrics: LoopMetrics) { members.append((loop, metrics)) }

    /// Where the open-connection gauge and the reload counts come from (set before the loops start).
    public func setSources(
        openConnections: @escaping @Sendable () -> Int,
        reloads: @escaping @Sendable () -> ReloadStatus
    ) {
        self.openConnections = openConnections
        self.reloads = reloads
    }

    /// The reload counts and how the last load ended, now.
    func reloadStatus() -> ReloadStatus { reloads() }

    /// Asks every loop for its counters and calls `completion` on `loop` with their sum.
    /// `providers` is the scraping loop's view of every provider's login state (every loop is
    /// handed the same snapshots, so one loop's view is the process's).
    func gather(on loop: EventLoop, providers: [ProviderGauge], _ completion: @escaping (String) -> Void) {
        let box = GatherBox(remaining: members.count, completion: completion)
        let open = openConnections
        let reloads = reloads
        let analytics = analytics
        let refreshes = refreshes
        let profile = profile
        let experiments = experiments
        for member in members {
            let metrics = member.metrics
            member.loop.execute {
                let copy = metrics.copy()
                loop.execute {
                    box.total.merge(copy)
                    box.remaining -= 1
                    if box.remaining == 0 {
                        box.completion(
                            PrometheusText.render(box.total, open: open(), reloads: reloads())
                                + PrometheusText.render(process: ProcessStats.read(), profile: profile)
                                + (analytics.map(PrometheusText.render(analytics:)) ?? "")
                                + (providers.isEmpty ? "" : PrometheusText.render(providers: providers))
                                + (refreshes.isEmpty ? "" : PrometheusText.render(refreshes: refreshes))
                                + (experiments.map(PrometheusText.render(experiments:)) ?? ""))
                    }
                }
            }
        }
    }

    /// The gathering state, touched only on the scraping loop.
    private final class GatherBox: @unchecked Sendable {
        var total = MetricsSnapshot()
        var remaining: Int
        let completion: (String) -> Void
        init(remaining: Int, completion: @escaping (String) -> Void) {
            self.remaining = remaining
            self.completion = completion
        }
    }
}
