import Testing

@testable import Upstream

@Suite struct UpstreamTLSTests {
    /// The URL libcurl is given for a `serverName`, and where the connection still goes.
    @Test(arguments: [
        ("https://10.0.0.5:8443", "https://orders.internal:8443", "orders.internal:8443:10.0.0.5:8443"),
        ("https://10.0.0.5", "https://orders.internal:443", "orders.internal:443:10.0.0.5:443"),
        ("http://upstream", "http://orders.internal:80", "orders.internal:80:upstream:80"),
        ("https://[::1]:9443", "https://orders.internal:9443", "orders.internal:9443:[::1]:9443"),
        (
            "https://idp.test:8443/oauth/token?x=1", "https://orders.internal:8443/oauth/token?x=1",
            "orders.internal:8443:idp.test:8443"
        ),
    ])
    func serverNameReplacesTheHostAndConnectsToTheOriginalOne(origin: String, named: String, connectTo: String) throws {
        let tls = UpstreamTLS(caFile: nil, clientCertificate: nil, clientKey: nil, serverName: "orders.internal")
        let result = try #require(tls.named(RequestURL(origin: origin, path: "/p", query: "q=1")))
        #expect(result.target.origin == named && result.target.path == "/p" && result.target.query == "q=1")
        #expect(result.connectTo == connectTo)
    }

    @Test func aRoutesServerNameStandsForItsUpstreamHostOnly() throws {
        let tls = UpstreamTLS(
            caFile: nil, clientCertificate: nil, clientKey: nil, serverName: "orders.internal",
            serverNameHost: "10.0.0.5")
        #expect(
            try #require(tls.named(RequestURL(origin: "https://10.0.0.5:8443", path: "/", query: nil))).connectTo
                == "orders.internal:8443:10.0.0.5:8443")
        // A redirect to another host is verified under that host's own name.
        #expect(tls.named(RequestURL(origin: "https://elsewhere.test", path: "/", query: nil)) == nil)
    }

    @Test func withoutAServerNameTheURLStays() {
        let tls = UpstreamTLS(caFile: "/ca.pem", clientCertificate: nil, clientKey: nil, serverName: nil)
        #expect(tls.named(RequestURL("https://a.test/x")) == nil)
    }
}
