import Config
import Credentials
import Testing
import Upstream

@testable import Proxy

private func runtime(_ routes: String) -> ProxyRuntime {
    let text =
        #"{"listen": ["127.0.0.1:0"], "provider": {"grant": "static", "accessToken": "a", "idToken": "b"}, "routes": "#
        + routes + "}"
    guard case .success(let configuration) = ConfigLoader.parse(Array(text.utf8), configDirectory: "/tmp") else {
        fatalError("test config did not parse: \(text)")
    }
    return ProxyRuntime(configuration: configuration)
}

private func plan(_ runtime: ProxyRuntime, _ index: Int) -> ForwardPlan {
    let compiled = runtime.router.routes[index]
    let slot = RouteSlot(
        route: compiled, runtime: runtime, provider: ProviderSlot(name: "default"), counters: RouteCounters())
    return ForwardPlan(slot: slot, rest: "", query: nil, mockMode: nil)
}

private func snapshot(_ generation: UInt64, access: String, id: String?) -> CredentialSnapshot {
    CredentialSnapshot(generation: generation, accessToken: access, idToken: id, tokenType: "Bearer")
}

@Suite("InjectedLineCache")
struct InjectedLineCacheTests {
    private let twoRoutes =
        #"[{"name": "a", "path": "/a/", "upstream": "http://127.0.0.1:1/", "credential": "access_token"},"#
        + #"{"name": "j", "path": "/j/", "upstream": "http://127.0.0.1:1/", "credential": "jwt", "headers": ["X-Id"]}]"#

    @Test("lines are made once per snapshot and follow a token rotation")
    func rotation() {
        var cache = InjectedLineCache()
        let rt = runtime(twoRoutes)
        let first = snapshot(1, access: "t1", id: "i1")
        #expect(
            cache.lines(plan(rt, 0), snapshot: first)?.lines.lines == [
                "Authorization: Bearer t1", "X-Authorization: Bearer t1",
            ])
        #expect(cache.lines(plan(rt, 1), snapshot: first)?.lines.lines == ["X-Id: Bearer i1"])
        let second = snapshot(2, access: "t2", id: nil)
        #expect(
            cache.lines(plan(rt, 0), snapshot: second)?.lines.lines == [
                "Authorization: Bearer t2", "X-Authorization: Bearer t2",
            ])
        #expect(cache.lines(plan(rt, 1), snapshot: second) == nil)  // no id_token: the route cannot be served
    }

    @Test("a plan made before a reload gets its own route's lines, never the new runtime's route at that index")
    func reload() {
        var cache = InjectedLineCache()
        let old = runtime(twoRoutes)
        let new = runtime(
            #"[{"name": "j", "path": "/j/", "upstream": "http://127.0.0.1:1/", "credential": "jwt", "headers": ["X-Id"]}]"#
        )
        let tokens = snapshot(1, access: "t", id: "i")
        #expect(cache.lines(plan(new, 0), snapshot: tokens)?.lines.lines == ["X-Id: Bearer i"])
        // A request gated before the reload resumes with the old plan (route 0 = access token).
        #expect(
            cache.lines(plan(old, 0), snapshot: tokens)?.lines.lines == [
                "Authorization: Bearer t", "X-Authorization: Bearer t",
            ])
        #expect(cache.lines(plan(new, 0), snapshot: tokens)?.lines.lines == ["X-Id: Bearer i"])
    }

    @Test(
        "the cached lines say whether they name Accept or Content-Type, as a scan of them would, so requests do not scan"
    )
    func suppliesFoundOnce() {
        var cache = InjectedLineCache()
        let rt = runtime(
            #"[{"name": "a", "path": "/a/", "upstream": "http://127.0.0.1:1/", "credential": "access_token"},"#
                + #"{"name": "c", "path": "/c/", "upstream": "http://127.0.0.1:1/", "credential": "access_token", "headers": ["Accept", "X-T"]}]"#
        )
        let tokens = snapshot(1, access: "t", id: "i")
        let plain = cache.lines(plan(rt, 0), snapshot: tokens)
        #expect(plain?.supplies == SuppliedFields(accept: false, contentType: false))
        let named = cache.lines(plan(rt, 1), snapshot: tokens)
        #expect(named?.lines.lines == ["Accept: Bearer t", "X-T: Bearer t"])
        #expect(named?.supplies == SuppliedFields(accept: true, contentType: false))
    }
}
