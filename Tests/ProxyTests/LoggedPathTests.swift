import Testing

@testable import Proxy

struct LoggedPathTests {
    @Test("journey step ids never reach the access log")
    func stepIdsRedacted() {
        #expect(ProxyHandler.loggedPath("/_platform/login/journey/Yo8o5Bsecret") == "/_platform/login/journey/<step>")
        #expect(ProxyHandler.loggedPath("/_platform/login/journey/") == "/_platform/login/journey/")
        #expect(ProxyHandler.loggedPath("/_platform/login/journey") == "/_platform/login/journey")
        #expect(ProxyHandler.loggedPath("/api/x") == "/api/x")
    }
}
