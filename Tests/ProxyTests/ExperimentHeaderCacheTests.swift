import Config
import Credentials
import Experiments
import Glibc
import Testing

@testable import Proxy

private func runtime(_ experiments: String) -> ProxyRuntime {
    let text = #"{"listen": ["127.0.0.1:0"], "experiments": "# + experiments + "}"
    guard case .success(let configuration) = ConfigLoader.parse(Array(text.utf8), configDirectory: "/tmp") else {
        fatalError("test config did not parse: \(text)")
    }
    return ProxyRuntime(configuration: configuration)
}

private func loggedIn(_ subject: String, generation: UInt64) -> CredentialSnapshot {
    CredentialSnapshot(
        generation: generation, accessToken: "a", idToken: nil, tokenType: "Bearer",
        status: AuthStatus(state: .loggedIn, subject: subject))
}

@Suite("ExperimentHeaderCache")
struct ExperimentHeaderCacheTests {
    /// "b" wins for every subject from t=100, when the split starts.
    private let scheduled =
        #"{"e": {"variants": {"a": 1, "b": 0}}, "later": {"variants": {"off": 0, "on": 1}, "start": "1970-01-01T00:01:40Z"}}"#

    private func service() -> (ExperimentService, String) {
        var template = Array("/tmp/experiment-header-test-XXXXXX".utf8CString)
        let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        return (ExperimentService(stateDirectory: dir), dir)
    }

    @Test("the line is reused until a start/end boundary, an override, a new snapshot or a new config")
    func invalidation() {
        let (service, dir) = service()
        defer { service.shutdown(); _ = unlink(dir + "/experiments.json"); rmdir(dir) }
        var cache = ExperimentHeaderCache()
        let rt = runtime(scheduled)
        let jdoe = loggedIn("jdoe", generation: 1)
        #expect(
            cache.lines(runtime: rt, credentials: jdoe, service: service, now: 99).lines == [
                "X-Experiments: e=a; later=off"
            ])
        #expect(
            cache.lines(runtime: rt, credentials: jdoe, service: service, now: 99.9).lines == [
                "X-Experiments: e=a; later=off"
            ])
        #expect(
            cache.lines(runtime: rt, credentials: jdoe, service: service, now: 100).lines == [
                "X-Experiments: e=a; later=on"
            ])
        service.setOverride("b", for: "e")
        #expect(
            cache.lines(runtime: rt, credentials: jdoe, service: service, now: 101).lines == [
                "X-Experiments: e=b; later=on"
            ])
        service.clearOverride("e")
        let other = runtime(#"{"e": {"variants": {"a": 0, "b": 1}}}"#)
        #expect(
            cache.lines(runtime: other, credentials: jdoe, service: service, now: 102).lines == ["X-Experiments: e=b"])
        #expect(cache.lines(runtime: runtime("{}"), credentials: jdoe, service: service, now: 102).isEmpty)
    }

    @Test("logged out, the installation id is the subject; logged in, the login's subject")
    func subjects() {
        let (service, dir) = service()
        defer { service.shutdown(); _ = unlink(dir + "/experiments.json"); rmdir(dir) }
        let rt = runtime(#"{"e": {"variants": {"a": 1, "b": 1, "c": 1, "d": 1}}}"#)
        let plan = rt.experiments.plans[0]
        var cache = ExperimentHeaderCache()
        #expect(
            cache.lines(runtime: rt, credentials: .empty, service: service, now: 0).lines
                == ["X-Experiments: e=\(plan.variant(for: service.installationID, at: 0))"])
        #expect(
            cache.lines(runtime: rt, credentials: loggedIn("jdoe", generation: 2), service: service, now: 0).lines
                == ["X-Experiments: e=\(plan.variant(for: "jdoe", at: 0))"])
    }
}
