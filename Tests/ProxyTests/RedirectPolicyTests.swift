import Config
import Credentials
import Testing

@testable import Proxy

@Suite("RedirectPolicy")
struct RedirectPolicyTests {
    private let base = UpstreamURL.parse("http://up.example/v1/a/page?q=1")!

    @Test(
        "remove_dot_segments (RFC 3986 §5.2.4) never climbs above the root",
        arguments: [
            ("/a/b/../c", "/a/c"), ("/a/b/..", "/a/"), ("/../../x", "/x"), ("/.", "/"), ("/a/./b", "/a/b"),
            ("/a/b/.", "/a/b/"), ("/", "/"), ("/a..b/.c", "/a..b/.c"), ("/a/../../b/./c/..", "/b/"),
        ])
    func removeDotSegments(path: String, expected: String) {
        #expect(RedirectPolicy.removeDotSegments(path) == expected)
    }

    @Test(
        "Locations resolve against the current URL with dot segments removed",
        arguments: [
            ("../../../x", "http://up.example/x"), ("b", "http://up.example/v1/a/b"),
            ("./c/../d", "http://up.example/v1/a/d"), ("/r/../s", "http://up.example/s"),
            ("?n=2", "http://up.example/v1/a/page?n=2"), ("//other.example/./p", "http://other.example/p"),
            ("https://h.example/a/../b", "https://h.example/b"),
        ])
    func resolve(location: String, expected: String) {
        #expect(RedirectPolicy.resolve(location, against: base)?.description == expected)
    }

    @Test(
        "cross-host hops are followed only as GET or HEAD",
        arguments: [
            (307, "POST", true, RedirectPolicy.Decision.relay), (308, "PUT", true, .relay),
            (301, "DELETE", false, .relay), (302, "PATCH", true, .relay),
            (
                302, "POST", true,
                .follow(url: UpstreamURL.parse("http://foreign.example/x")!, method: "GET", keepsBody: false)
            ),
            (
                307, "GET", false,
                .follow(url: UpstreamURL.parse("http://foreign.example/x")!, method: "GET", keepsBody: false)
            ),
            (
                303, "PUT", true,
                .follow(url: UpstreamURL.parse("http://foreign.example/x")!, method: "GET", keepsBody: false)
            ),
        ])
    func crossHost(status: Int, method: String, hasBody: Bool, expected: RedirectPolicy.Decision) {
        let decision = RedirectPolicy.decide(
            status: status, location: "http://foreign.example/x", method: method,
            hasBody: hasBody, bodyReplayable: true, current: base, follow: true,
            max: 5, hops: 0, trusted: { $0.host == "up.example" })
        #expect(decision == expected)
    }

    @Test("the same methods are followed to a trusted host")
    func trustedHost() {
        let decision = RedirectPolicy.decide(
            status: 307, location: "/upload", method: "POST", hasBody: true,
            bodyReplayable: true, current: base, follow: true, max: 5, hops: 0,
            trusted: { $0.host == "up.example" })
        #expect(
            decision == .follow(url: UpstreamURL.parse("http://up.example/upload")!, method: "POST", keepsBody: true))
    }

    @Test("a Location with encoded dot segments is relayed, not followed")
    func encodedDots() {
        let decision = RedirectPolicy.decide(
            status: 302, location: "/a/%2e%2e/b", method: "GET", hasBody: false,
            bodyReplayable: false, current: base, follow: true, max: 5, hops: 0)
        #expect(decision == .relay)
    }
}

/// `decide` as `ForwardedExchange` calls it, with a route's redirect rules and injector.
private func decide(
    _ status: Int, _ location: String?, method: String = "GET", hasBody: Bool = false, replayable: Bool = true,
    from current: String = "https://api.example/v1/items", follow: Bool = true, max: Int = 5, hops: Int = 0,
    methods: RedirectConfiguration.CrossHostMethods = .safe,
    credentialHosts: [String] = ["api.example:443"]
) -> RedirectPolicy.Decision {
    let upstream = UpstreamURL.parse("https://api.example/")!
    let route = RouteConfiguration(
        name: "r", path: "/", upstream: upstream, credential: .accessToken,
        redirects: RedirectConfiguration(
            follow: follow, max: max, credentialHosts: credentialHosts,
            crossHostMethods: methods))
    let injector = CredentialInjector(route: route)
    let current = UpstreamURL.parse(current)!
    return RedirectPolicy.decide(
        status: status, location: location, method: method, hasBody: hasBody, bodyReplayable: replayable,
        current: current, follow: follow, max: max, hops: hops,
        trusted: { RedirectPolicy.trusts($0, from: current, methods: methods, injector: injector) })
}

private func to(_ url: String, _ method: String, body: Bool = false) -> RedirectPolicy.Decision {
    .follow(url: UpstreamURL.parse(url)!, method: method, keepsBody: body)
}

@Suite("RedirectPolicy with a route's rules")
struct RedirectPolicyRouteTests {
    @Test(
        "same-host hops keep the method and, for 307/308, the body",
        arguments: [(301, "PUT"), (302, "DELETE"), (307, "POST"), (308, "PATCH")])
    func sameHost(status: Int, method: String) {
        #expect(
            decide(status, "/v2/items", method: method, hasBody: true)
                == to("https://api.example/v2/items", method, body: true))
    }

    @Test("301 and 302 turn POST into GET without the body, as browsers do", arguments: [301, 302])
    func postBecomesGet(status: Int) {
        #expect(decide(status, "/done", method: "POST", hasBody: true) == to("https://api.example/done", "GET"))
    }

    @Test(
        "303 becomes GET without the body for every method but HEAD, which stays HEAD",
        arguments: [("POST", "GET"), ("PUT", "GET"), ("DELETE", "GET"), ("GET", "GET"), ("HEAD", "HEAD")])
    func seeOther(method: String, expected: String) {
        #expect(
            decide(303, "/other", method: method, hasBody: method != "HEAD" && method != "GET")
                == to("https://api.example/other", expected))
    }

    @Test("a body that was not kept whole cannot be resent: the 3xx is relayed", arguments: [301, 307, 308])
    func unreplayableBody(status: Int) {
        #expect(decide(status, "/again", method: "PUT", hasBody: true, replayable: false) == .relay)
    }

    @Test("cross-host hops to an untrusted host are followed only as GET or HEAD with crossHostMethods safe")
    func untrustedHost() {
        #expect(decide(307, "https://cdn.example/x", method: "POST", hasBody: true) == .relay)
        #expect(decide(302, "https://cdn.example/x") == to("https://cdn.example/x", "GET"))
        #expect(decide(307, "https://cdn.example/x", method: "HEAD") == to("https://cdn.example/x", "HEAD"))
    }

    @Test("crossHostMethods all follows every method to any host, body included")
    func crossHostAll() {
        #expect(
            decide(307, "https://cdn.example/x", method: "POST", hasBody: true, methods: .all)
                == to("https://cdn.example/x", "POST", body: true))
    }

    @Test("a listed credential host is trusted like the upstream itself")
    func trustedOtherHost() {
        #expect(
            decide(
                308, "https://auth.example/x", method: "PUT", hasBody: true,
                credentialHosts: ["api.example:443", "auth.example:443"])
                == to("https://auth.example/x", "PUT", body: true))
    }

    @Test("an https to http downgrade on the same host is not trusted: unsafe methods are relayed, GET is followed")
    func schemeDowngrade() {
        #expect(decide(307, "http://api.example:443/x", method: "POST", hasBody: true) == .relay)
        #expect(decide(302, "http://api.example:443/x") == to("http://api.example:443/x", "GET"))
    }

    @Test("the hop limit: the max-th hop is followed, the next is too many; max 0 refuses the first")
    func hopLimit() {
        #expect(decide(302, "/a", max: 5, hops: 4) == to("https://api.example/a", "GET"))
        #expect(decide(302, "/a", max: 5, hops: 5) == .tooManyRedirects)
        #expect(decide(302, "/a", max: 0, hops: 0) == .tooManyRedirects)
    }

    @Test(
        "follow off, other statuses, no or unusable Location: relayed",
        arguments: [
            (302, Optional("/x"), false), (300, "/x", true), (304, "/x", true), (305, "/x", true), (302, nil, true),
            (302, "", true), (301, "/a/%2E%2E/b", true),
        ])
    func relayed(status: Int, location: String?, follow: Bool) {
        #expect(decide(status, location, follow: follow) == .relay)
    }

    @Test("relative Locations resolve against the current hop, dot segments removed")
    func dotSegments() {
        #expect(
            decide(302, "../../../../etc", from: "https://api.example/v1/a/b") == to("https://api.example/etc", "GET"))
        #expect(
            decide(302, "./c/./d/../e?x=1", from: "https://api.example/v1/a/b")
                == to("https://api.example/v1/a/c/e?x=1", "GET"))
    }

    @Test("a Location is absolute only when it starts with a scheme; a fragment is dropped, never sent")
    func schemeAndFragment() {
        let from = "https://api.example/v1/a/b"
        #expect(
            decide(302, "/next?return_to=https://example.com/", from: from)
                == to("https://api.example/next?return_to=https://example.com/", "GET"))
        #expect(decide(302, "next?u=http://x", from: from) == to("https://api.example/v1/a/next?u=http://x", "GET"))
        #expect(decide(302, "/next#section", from: from) == to("https://api.example/next", "GET"))
        #expect(decide(302, "https://api.example/z#top", from: from) == to("https://api.example/z", "GET"))
        #expect(decide(302, "HTTPS://api.example/y", from: from) == to("https://api.example/y", "GET"))
        // A scheme without an authority is no URL the proxy can request: relayed, not resolved under the path.
        #expect(decide(302, "https:/api.example/x", from: from) == .relay)
        #expect(decide(302, "https:api.example/x", from: from) == .relay)
        #expect(decide(302, "#only", from: from) == .relay)
    }

    @Test(
        "a scheme is a letter, then letters, digits, + - or ., then a colon before any / ? or #",
        arguments: [
            ("http:", true), ("git+ssh:x", true), ("a:", true), ("1a:", false), (":x", false), ("/a:b", false),
            ("a/b:c", false), ("?x:y", false), ("", false), ("abc", false), ("a.b-c+d:", true),
        ])
    func schemes(reference: String, expected: Bool) {
        #expect(RedirectPolicy.hasScheme(reference) == expected)
    }
}
