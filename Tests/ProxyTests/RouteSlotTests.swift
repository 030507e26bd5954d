import Config
import Testing

@testable import Proxy

private func runtime() -> ProxyRuntime {
    let text =
        #"{"listen": ["127.0.0.1:0"], "provider": {"grant": "static", "accessToken": "a", "idToken": "b"}, "routes": ["#
        + #"{"name": "a", "path": "/a/", "upstream": "http://127.0.0.1:1/", "credential": "access_token"},"#
        + #"{"name": "b", "path": "/b/", "upstream": "http://127.0.0.1:1/"}]}"#
    guard case .success(let configuration) = ConfigLoader.parse(Array(text.utf8), configDirectory: "/tmp") else {
        fatalError("test config did not parse")
    }
    return ProxyRuntime(configuration: configuration)
}

@Suite("RouteSlot")
struct RouteSlotTests {
    private func make(_ route: CompiledRoute, _ runtime: ProxyRuntime, _ made: inout Int) -> RouteSlot {
        made += 1
        return RouteSlot(
            route: route, runtime: runtime, provider: ProviderSlot(name: "default"), counters: RouteCounters())
    }

    @Test("a route's slot is made once per runtime, and again after a reload")
    func oncePerRuntime() {
        var table = RouteSlotTable()
        var made = 0
        let first = runtime()
        let a = first.router.routes[0], b = first.router.routes[1]
        let slotA = table.slot(a, of: first) { make(a, first, &made) }
        #expect(table.slot(a, of: first) { make(a, first, &made) } === slotA)
        #expect(table.slot(b, of: first) { make(b, first, &made) } !== slotA)
        #expect(made == 2)
        let reloaded = runtime()
        let again = table.slot(reloaded.router.routes[0], of: reloaded) {
            make(reloaded.router.routes[0], reloaded, &made)
        }
        #expect(again !== slotA && again.route === reloaded.router.routes[0])
        #expect(made == 3)
    }

    @Test("a route of another runtime gets a fresh slot and is not kept")
    func foreignRoute() {
        var table = RouteSlotTable()
        var made = 0
        let current = runtime(), stale = runtime()
        _ = table.slot(current.router.routes[0], of: current) { make(current.router.routes[0], current, &made) }
        let foreign = table.slot(stale.router.routes[0], of: current) { make(stale.router.routes[0], stale, &made) }
        #expect(foreign.route === stale.router.routes[0])
        #expect(
            table.slot(current.router.routes[0], of: current) { make(current.router.routes[0], current, &made) }.route
                === current.router.routes[0])
        #expect(made == 2)
    }
}

@Suite("LoopMetrics")
struct LoopMetricsTests {
    @Test("requests counted through a route's counters and by name land in one snapshot")
    func foldsCounters() {
        let metrics = LoopMetrics()
        let api = metrics.counters(route: "api")
        api.request(status: 200, seconds: 0.002)
        api.request(status: 200, seconds: 0.002)
        api.request(status: 502, seconds: 0.5)
        metrics.request(route: "api", status: 200, seconds: 0.002)
        metrics.request(route: "_unrouted", status: 404, seconds: 0)
        api.injected += 3
        let snapshot = metrics.copy()
        #expect(snapshot.requests[RouteStatus(route: "api", status: 200)] == 3)
        #expect(snapshot.requests[RouteStatus(route: "api", status: 502)] == 1)
        #expect(snapshot.requests[RouteStatus(route: "_unrouted", status: 404)] == 1)
        #expect(snapshot.requests.count == 3)
        #expect(snapshot.latency["api"]?.count == 4)
        #expect(snapshot.latency["api"]?.counts[LatencyHistogram.bounds.firstIndex(of: 0.0025)!] == 3)
        #expect(snapshot.injected == ["api": 3])
        // Copies are values: counting on does not change one taken before.
        api.request(status: 200, seconds: 0.002)
        #expect(snapshot.requests[RouteStatus(route: "api", status: 200)] == 3)
        #expect(metrics.copy().requests[RouteStatus(route: "api", status: 200)] == 4)
    }

    @Test("a route with injections but no finished request has no latency series")
    func noEmptyLatency() {
        let metrics = LoopMetrics()
        metrics.counters(route: "slow").injected += 1
        let snapshot = metrics.copy()
        #expect(snapshot.latency["slow"] == nil)
        #expect(snapshot.requests.isEmpty)
        #expect(snapshot.injected == ["slow": 1])
    }
}
