import Config
import Testing
@testable import Proxy

@Suite("RedirectPolicy")
struct RedirectPolicyTests {
    private let base = UpstreamURL.parse("http://up.example/v1/a/page?q=1")!

    @Test("remove_dot_segments (RFC 3986 §5.2.4) never climbs above the root",
          arguments: [("/a/b/../c", "/a/c"), ("/a/b/..", "/a/"), ("/../../x", "/x"), ("/.", "/"), ("/a/./b", "/a/b"),
                      ("/a/b/.", "/a/b/"), ("/", "/"), ("/a..b/.c", "/a..b/.c"), ("/a/../../b/./c/..", "/b/")])
    func removeDotSegments(path: String, expected: String) {
        #expect(RedirectPolicy.removeDotSegments(path) == expected)
    }

    @Test("Locations resolve against the current URL with dot segments removed",
          arguments: [("../../../x", "http://up.example/x"), ("b", "http://up.example/v1/a/b"),
                      ("./c/../d", "http://up.example/v1/a/d"), ("/r/../s", "http://up.example/s"),
                      ("?n=2", "http://up.example/v1/a/page?n=2"), ("//other.example/./p", "http://other.example/p"),
                      ("https://h.example/a/../b", "https://h.example/b")])
    func resolve(location: String, expected: String) {
        #expect(RedirectPolicy.resolve(location, against: base)?.description == expected)
    }

    @Test("cross-host hops are followed only as GET or HEAD",
          arguments: [(307, "POST", true, RedirectPolicy.Decision.relay), (308, "PUT", true, .relay),
                      (301, "DELETE", false, .relay), (302, "PATCH", true, .relay),
                      (302, "POST", true, .follow(url: UpstreamURL.parse("http://foreign.example/x")!, method: "GET", keepsBody: false)),
                      (307, "GET", false, .follow(url: UpstreamURL.parse("http://foreign.example/x")!, method: "GET", keepsBody: false)),
                      (303, "PUT", true, .follow(url: UpstreamURL.parse("http://foreign.example/x")!, method: "GET", keepsBody: false))])
    func crossHost(status: Int, method: String, hasBody: Bool, expected: RedirectPolicy.Decision) {
        let decision = RedirectPolicy.decide(status: status, location: "http://foreign.example/x", method: method,
                                             hasBody: hasBody, bodyReplayable: true, current: base, follow: true,
                                             max: 5, hops: 0, trusted: { $0.host == "up.example" })
        #expect(decision == expected)
    }

    @Test("the same methods are followed to a trusted host")
    func trustedHost() {
        let decision = RedirectPolicy.decide(status: 307, location: "/upload", method: "POST", hasBody: true,
                                             bodyReplayable: true, current: base, follow: true, max: 5, hops: 0,
                                             trusted: { $0.host == "up.example" })
        #expect(decision == .follow(url: UpstreamURL.parse("http://up.example/upload")!, method: "POST", keepsBody: true))
    }

    @Test("a Location with encoded dot segments is relayed, not followed")
    func encodedDots() {
        let decision = RedirectPolicy.decide(status: 302, location: "/a/%2e%2e/b", method: "GET", hasBody: false,
                                             bodyReplayable: false, current: base, follow: true, max: 5, hops: 0)
        #expect(decision == .relay)
    }
}
